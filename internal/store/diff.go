package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"ariga.io/atlas/sql/migrate"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"

	"gatehouse/ent"
)

// diffOptions are those of every comparison between the Ent schema and
// the migration directory, so that writing a migration and checking the
// directory agree: drops included (a removed field or index becomes a
// DROP in the new file, for its author to review), Atlas's file format.
func diffOptions(dir migrate.Dir, mode schema.Mode) []schema.MigrateOption {
	return []schema.MigrateOption{
		schema.WithDir(dir),
		schema.WithMigrationMode(mode),
		schema.WithDialect(dialect.Postgres),
		schema.WithFormatter(migrate.DefaultFormatter),
		schema.WithDropColumn(true),
		schema.WithDropIndex(true),
		schema.WithErrNoPlan(true),
	}
}

// WriteMigration writes to the directory at dirPath the migration file
// that takes the schema its files build to the Ent schema, named
// <version>_<name>.sql, and updates atlas.sum. devDB must be an empty
// Postgres database: the directory is replayed on it (and cleaned up).
// It returns the new file's name, or "" when the schemas already agree.
func WriteMigration(ctx context.Context, devDB *sql.DB, dirPath, name string) (string, error) {
	dir, err := migrate.NewLocalDir(dirPath)
	if err != nil {
		return "", err
	}
	before, err := fileNames(dir)
	if err != nil {
		return "", err
	}
	client := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, devDB)))
	err = client.Schema.NamedDiff(ctx, name, diffOptions(dir, schema.ModeReplay)...)
	if errors.Is(err, migrate.ErrNoPlan) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("diff the Ent schema against %s: %w", dirPath, err)
	}
	after, err := fileNames(dir)
	if err != nil {
		return "", err
	}
	for _, n := range after {
		if !slices.Contains(before, n) {
			return n, nil
		}
	}
	return "", errors.New("the diff wrote no new file")
}

// PendingSchemaChanges returns the statements Ent would run on db to
// match the Ent schema, as a migration file's text; empty when the
// database (migrated from the directory) and the Ent schema agree.
func PendingSchemaChanges(ctx context.Context, db *DB) (string, error) {
	dir := &migrate.MemDir{}
	err := db.schema().NamedDiff(ctx, "pending", diffOptions(dir, schema.ModeInspect)...)
	if errors.Is(err, migrate.ErrNoPlan) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	files, err := dir.Files()
	if err != nil {
		return "", err
	}
	var text string
	for _, f := range files {
		text += string(f.Bytes())
	}
	return text, nil
}

// RehashMigrations recomputes atlas.sum of the directory at dirPath from
// its files.
func RehashMigrations(dirPath string) error {
	dir, err := migrate.NewLocalDir(dirPath)
	if err != nil {
		return err
	}
	files, err := dir.Files()
	if err != nil {
		return err
	}
	sum, err := migrate.NewHashFile(files)
	if err != nil {
		return err
	}
	return migrate.WriteSumFile(dir, sum)
}

func fileNames(dir migrate.Dir) ([]string, error) {
	files, err := dir.Files()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name()
	}
	return names, nil
}
