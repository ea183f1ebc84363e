package main

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/app"
	"gatehouse/internal/demo"
	"gatehouse/internal/store"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the service (migrates the schema first)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "demo", Usage: "seed demo data and print credentials and example commands"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg, err := configFrom(cmd)
			if err != nil {
				return fmt.Errorf("configuration:\n%w", err)
			}
			log := cfg.NewLogger(os.Stderr)
			for _, k := range cfg.GeneratedKeys {
				log.Warn("generated a development key; set GATEHOUSE_MASTER_KEY and GATEHOUSE_JWT_SECRET in production", "file", k, "data_dir", cfg.DataDir)
			}
			a, err := app.New(ctx, cfg, log)
			if err != nil {
				return err
			}
			ls, err := a.Listen()
			if err != nil {
				_ = a.Close(ctx)
				return err
			}
			if cmd.Bool("demo") {
				if err := demo.Seed(ctx, a, ls, cmd.Root().Writer); err != nil {
					_ = a.Close(ctx)
					return fmt.Errorf("seed demo data: %w", err)
				}
			}
			if err := a.Start(ctx); err != nil {
				_ = a.Close(ctx)
				return err
			}
			log.Info("listening", "public", ls.Public.Addr().String(), "admin", ls.Admin.Addr().String(), "database", dbKind(cfg.Embedded()), "kv", kvKind(cfg.RedisURL))
			return a.Serve(ctx, ls)
		},
	}
}

func dbKind(embedded bool) string {
	if embedded {
		return "sqlite"
	}
	return "postgres"
}

func kvKind(redisURL string) string {
	if redisURL == "" {
		return "memory"
	}
	return "redis"
}

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "bring the database schema up to date and exit",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg, err := configFrom(cmd)
			if err != nil {
				return fmt.Errorf("configuration:\n%w", err)
			}
			db, err := store.Open(ctx, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.Migrate(ctx); err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.Root().Writer, "schema is up to date")
			return err
		},
	}
}
