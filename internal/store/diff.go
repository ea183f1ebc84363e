package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"text/template"

	"ariga.io/atlas/sql/migrate"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"

	"gatehouse/ent"
)

// diffOptions are those of every comparison between the Ent schema and
// a migration directory of dialectName, so that writing a migration and
// checking the directory agree: drops included (a removed field or index
// becomes a DROP in the new file, for its author to review), Atlas's file
// format, the file named by version (empty: the current time).
func diffOptions(dir migrate.Dir, mode schema.Mode, dialectName, version string) []schema.MigrateOption {
	return []schema.MigrateOption{
		schema.WithDir(dir),
		schema.WithMigrationMode(mode),
		schema.WithDialect(dialectName),
		schema.WithFormatter(formatter(version)),
		schema.WithDropColumn(true),
		schema.WithDropIndex(true),
		schema.WithErrNoPlan(true),
	}
}

// formatter is Atlas's file format with the file named
// <version>_<name>.sql, so that one schema change gives the Postgres and
// the SQLite file the same version.
func formatter(version string) migrate.Formatter {
	if version == "" {
		return migrate.DefaultFormatter
	}
	name := template.Must(template.New("").Parse(version + "{{ with .Name }}_{{ . }}{{ end }}.sql"))
	return migrate.TemplateFormatter{{N: name, C: migrate.DefaultFormatter[0].C}}
}

// WriteMigration writes to the directory at dirPath the migration file of
// dialectName (dialect.Postgres or dialect.SQLite) that takes the schema
// its files build to the Ent schema, named <version>_<name>.sql (version
// empty: the current time), and updates atlas.sum. devDB must be an empty
// database of that dialect (SQLite with foreign keys on): the directory is
// replayed on it (and cleaned up). It returns the new file's name, or ""
// when the schemas already agree.
func WriteMigration(ctx context.Context, dialectName string, devDB *sql.DB, dirPath, name, version string) (string, error) {
	dir, err := migrate.NewLocalDir(dirPath)
	if err != nil {
		return "", err
	}
	before, err := fileNames(dir)
	if err != nil {
		return "", err
	}
	client := ent.NewClient(ent.Driver(entsql.OpenDB(dialectName, devDB)))
	err = client.Schema.NamedDiff(ctx, name, diffOptions(dir, schema.ModeReplay, dialectName, version)...)
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
	err := db.schema().NamedDiff(ctx, "pending", diffOptions(dir, schema.ModeInspect, db.Dialect, "")...)
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
