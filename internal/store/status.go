package store

import (
	"context"
	"fmt"
	"time"

	"ariga.io/atlas/sql/migrate"
)

// MigrationStatus is where a database stands against its migration
// directory.
type MigrationStatus struct {
	// Applied are the migrations recorded in the database, oldest first.
	Applied []AppliedMigration
	// Pending are the files the next migration will apply, oldest first.
	Pending []string
	// Unadopted: the database was made by auto-migrate before versioned
	// migrations; the next migration adopts it at the file Baseline first.
	Unadopted bool
	Baseline  string
}

// AppliedMigration is one recorded migration.
type AppliedMigration struct {
	Name       string
	ExecutedAt time.Time
	// Baseline: the database was adopted at this version, not migrated
	// by its file.
	Baseline bool
	// Partial: the file did not finish (applied / total statements).
	Partial bool
}

// MigrationStatus reads, without changing anything, which migration files
// the database has applied and which are pending.
func (d *DB) MigrationStatus(ctx context.Context) (MigrationStatus, error) {
	var st MigrationStatus
	v, err := versionedFor(d.Dialect)
	if err != nil {
		return st, err
	}
	dir, err := Migrations(d.Dialect)
	if err != nil {
		return st, err
	}
	files, err := dir.Files()
	if err != nil {
		return st, err
	}
	exists, err := v.tableExists(ctx, d.SQL, revisionsTable)
	if err != nil {
		return st, fmt.Errorf("migration status: %w", err)
	}
	var revs []*migrate.Revision
	if exists {
		if revs, err = (revisions{d.SQL, d.Dialect}).ReadRevisions(ctx); err != nil {
			return st, fmt.Errorf("migration status: %w", err)
		}
	}
	done := map[string]bool{}
	baseline := ""
	for _, r := range revs {
		name := r.Version + "_" + r.Description + ".sql"
		a := AppliedMigration{Name: name, ExecutedAt: r.ExecutedAt, Baseline: r.Type.Has(migrate.RevisionTypeBaseline), Partial: r.Applied < r.Total}
		st.Applied = append(st.Applied, a)
		if !a.Partial {
			done[r.Version] = true
		}
		if a.Baseline {
			baseline = r.Version
		}
	}
	if len(revs) == 0 && len(files) > 0 {
		made, err := v.madeByAutoMigrate(ctx, d.SQL)
		if err != nil {
			return st, err
		}
		if made {
			at, err := v.adoptAt(ctx, d.SQL, files)
			if err != nil {
				return st, err
			}
			st.Unadopted, st.Baseline, baseline = true, at.Name(), at.Version()
		}
	}
	for _, f := range files {
		if !done[f.Version()] && f.Version() > baseline {
			st.Pending = append(st.Pending, f.Name())
		}
	}
	return st, nil
}
