package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/app"
	"gatehouse/internal/config"
	"gatehouse/internal/datadir"
	"gatehouse/internal/demo"
	"gatehouse/internal/store"
	"gatehouse/internal/telemetry"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the service (migrates the schema first)",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg, err := config.FromCommand(cmd)
			if err != nil {
				return fmt.Errorf("configuration:\n%w", err)
			}
			if cfg.Demo.Enabled {
				// The demo app, and no other, may call back a receiver on
				// this machine.
				cfg.WebhookLoopbackApps = append(cfg.WebhookLoopbackApps, demo.DemoAppKey)
			}
			log, flushLog := cfg.NewLogger(os.Stderr)
			defer flushLog()
			// Tracing only when the OTEL_* variables ask for it; the app
			// flushes it when it stops (docs/operations.md).
			if cfg.Tracing, err = telemetry.FromEnv(ctx, version); err != nil {
				return fmt.Errorf("tracing:\n%w", err)
			}
			if cfg.Tracing.On() {
				sampler := os.Getenv("OTEL_TRACES_SAMPLER")
				if sampler == "" {
					sampler = "parentbased_always_on"
				}
				log.Info("tracing on: spans go to the OTLP/HTTP endpoint of the OTEL_* variables", "sampler", sampler)
			}
			gogc := tuneGC(ctx, cfg.Redis.URL)
			for _, k := range cfg.GeneratedKeys {
				log.Warn("generated a development key; set GATEHOUSE_MASTER_KEY and GATEHOUSE_JWT_SECRET in production", "file", k, "data_dir", cfg.Database.DataDir)
			}
			if cfg.Embedded() {
				// One serving process per embedded data dir, for its whole
				// life: a second one (a --reset above all) exits here.
				release, err := datadir.Lock(cfg.Database.DataDir)
				if err != nil {
					return err
				}
				defer release()
			}
			if cfg.Demo.Reset {
				if err := demo.Reset(cfg, log); err != nil {
					return err
				}
			}
			if cfg.Demo.Enabled {
				// The demo's payment SANDBOX, unless a provider is configured.
				sb, err := demo.StartPaymentSandbox(&cfg, log)
				if err != nil {
					return err
				}
				if sb != nil {
					defer sb.Close()
				}
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
			if cfg.Demo.Enabled {
				if err := demo.Seed(ctx, a, ls, cmd.Root().Writer); err != nil {
					_ = a.Close(ctx)
					return fmt.Errorf("seed demo data: %w", err)
				}
			}
			if err := a.Start(ctx); err != nil {
				_ = a.Close(ctx)
				return err
			}
			log.Info("listening", "public", ls.Public.Addr().String(), "admin", ls.Admin.Addr().String(), "database", dbKind(cfg.Embedded()), "kv", kvKind(cfg.Redis.URL), "gogc", gogc)
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
		Usage: "bring the database schema up to date, say what was applied, and exit",
		Description: "The versioned migration files built into the binary for the database (Postgres or the\n" +
			"  embedded SQLite) are applied, each in its own transaction (on Postgres under the same lock as\n" +
			"  at start-up); --status lists applied and pending ones and changes nothing.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "status", Usage: "list the applied and pending migrations; change nothing", Sources: cli.EnvVars("GATEHOUSE_MIGRATE_STATUS")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg, err := config.FromCommand(cmd)
			if err != nil {
				return fmt.Errorf("configuration:\n%w", err)
			}
			db, err := store.Open(ctx, cfg.Database.URL, app.StoreOptions(cfg)...)
			if err != nil {
				return err
			}
			defer db.Close()
			out := cmd.Root().Writer
			if cmd.Bool("status") {
				return printMigrationStatus(ctx, db, out)
			}
			rep, err := db.MigrateReport(ctx)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(out, rep.String())
			return err
		},
	}
}

// printMigrationStatus lists applied and pending migrations.
func printMigrationStatus(ctx context.Context, db *store.DB, w io.Writer) error {
	st, err := db.MigrationStatus(ctx)
	if err != nil {
		return err
	}
	if st.Unadopted {
		fmt.Fprintf(w, "the database was made before versioned migrations; the next migration adopts it at %s\n", st.Baseline)
	}
	for _, a := range st.Applied {
		state := "applied "
		switch {
		case a.Baseline:
			state = "baseline"
		case a.Partial:
			state = "partial "
		}
		fmt.Fprintf(w, "%s  %s  %s\n", state, a.Name, a.ExecutedAt.UTC().Format(time.RFC3339))
	}
	for _, p := range st.Pending {
		fmt.Fprintf(w, "pending   %s\n", p)
	}
	_, err = fmt.Fprintf(w, "%d applied, %d pending\n", len(st.Applied), len(st.Pending))
	return err
}
