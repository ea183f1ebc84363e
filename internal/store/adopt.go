package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"
	atlas "ariga.io/atlas/sql/schema"
)

// adopt brings a database made by auto-migrate to the file at, the
// schema that files up to at build, and reports what it added. That
// schema is replayed where nothing of it stays (v.replay) and compared
// with the live schema by Atlas. What auto-migrate would have added itself
// (tables, columns, indexes, foreign keys missing because the database
// came from an older release) is added; any other difference (a changed
// type, a column or table the file does not have) is refused with the
// list, since only a person can tell what it means.
func adopt(ctx context.Context, conn *sql.Conn, v versioned, files []migrate.File, at migrate.File) ([]string, error) {
	upTo := files[:slices.IndexFunc(files, func(f migrate.File) bool { return f.Version() == at.Version() })+1]
	want, err := v.replay(ctx, conn, upTo)
	if err != nil {
		return nil, err
	}
	drv, err := v.open(conn)
	if err != nil {
		return nil, err
	}
	live, err := drv.InspectSchema(ctx, "", nil)
	if err != nil {
		return nil, fmt.Errorf("inspect database: %w", err)
	}
	live.Tables = slices.DeleteFunc(live.Tables, func(t *atlas.Table) bool { return t.Name == revisionsTable })
	want.Name, want.Attrs = live.Name, live.Attrs
	changes, err := drv.SchemaDiff(live, want)
	if err != nil {
		return nil, fmt.Errorf("compare the database with %s: %w", at.Name(), err)
	}
	var added, refused []string
	for _, c := range changes {
		desc, ok := additive(c)
		if ok {
			added = append(added, desc...)
		} else {
			refused = append(refused, desc...)
		}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("the database was made before versioned migrations and differs from %s in ways "+
			"gatehouse will not change on its own: %s; see docs/migrations.md (Upgrading)", at.Name(), strings.Join(refused, "; "))
	}
	if len(changes) == 0 {
		return nil, nil
	}
	return added, applyChanges(ctx, conn, v, changes)
}

// applyChanges makes changes in one transaction.
func applyChanges(ctx context.Context, conn *sql.Conn, v versioned, changes []atlas.Change) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	txDrv, err := v.open(tx)
	if err != nil {
		return err
	}
	noQualifier := ""
	if err := txDrv.ApplyChanges(ctx, changes, func(o *migrate.PlanOptions) { o.SchemaQualifier = &noQualifier }); err != nil {
		return fmt.Errorf("bring the database to the adopted version: %w", err)
	}
	if v.verify != nil {
		if err := v.verify(ctx, tx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// additive describes c and reports whether it only adds what is missing.
func additive(c atlas.Change) ([]string, bool) {
	switch c := c.(type) {
	case *atlas.AddTable:
		return []string{"add table " + c.T.Name}, true
	case *atlas.ModifyTable:
		var descs []string
		ok := true
		for _, tc := range c.Changes {
			d, add := describeTableChange(tc)
			descs = append(descs, c.T.Name+": "+d)
			ok = ok && add
		}
		return descs, ok
	case *atlas.DropTable:
		return []string{"table " + c.T.Name + " is not in the baseline"}, false
	default:
		return []string{fmt.Sprintf("%T", c)}, false
	}
}

func describeTableChange(c atlas.Change) (string, bool) {
	switch c := c.(type) {
	case *atlas.AddColumn:
		return "add column " + c.C.Name, true
	case *atlas.AddIndex:
		return "add index " + c.I.Name, true
	case *atlas.AddForeignKey:
		return "add foreign key " + c.F.Symbol, true
	case *atlas.AddCheck:
		return "add check " + c.C.Name, true
	case *atlas.DropColumn:
		return "column " + c.C.Name + " is not in the baseline", false
	case *atlas.ModifyColumn:
		return "column " + c.From.Name + " differs from the baseline", false
	case *atlas.DropIndex:
		return "index " + c.I.Name + " is not in the baseline", false
	case *atlas.ModifyIndex:
		return "index " + c.From.Name + " differs from the baseline", false
	case *atlas.DropForeignKey:
		return "foreign key " + c.F.Symbol + " is not in the baseline", false
	case *atlas.ModifyForeignKey:
		return "foreign key " + c.From.Symbol + " differs from the baseline", false
	default:
		return fmt.Sprintf("%T", c), false
	}
}
