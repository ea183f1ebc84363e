// Command gatehouse-bench measures gatehouse against baselines measured in
// the same run, on loopback only.
//
// It starts gatehouse (the binary named by -gatehouse) as a separate
// process, embedded (SQLite + in-process store) and, when they answer,
// on Postgres + Redis; seeds it through the admin GraphQL API; and drives
// load from this process with requests signed before the clock starts
// (one unique nonce each). Baselines run as child processes of this binary
// (`gatehouse-bench baseline …`): a bare net/http JSON handler, a minimal
// handler doing one Redis and one Postgres round trip, a handler doing
// one conditional single-row UPDATE and one doing one INSERT of a ticket
// row (SQLite or Postgres). Webhook
// deliveries are measured against two floors run as child processes
// (`gatehouse-bench floor …`): a bare client POSTing to the same sink and
// a minimal outbox loop on the same kind of database. Every figure
// is printed on one line with its ratio to its baseline, and all of them
// are written to a JSON file.
//
//	make bench   # = go build … && gatehouse-bench -gatehouse bin/gatehouse -out bin/bench.json
//
// main reads the flags (bench.Options) and runs the phases in order
// (phases.go); the parts live in internal/:
//
//	bench      the run's settings and random identifiers
//	proc       child processes: start, health wait, CPU time, peak RSS
//	load       closed-loop load from the harness, alone or in turns with a floor
//	gatehouse  the process under test: start, replicas, seeding, admin GraphQL
//	floor      the floors, as child processes (`baseline …`, `floor …`)
//	sink       the webhook sink and the discarding OTLP collector
//	phases     the load phases: signed queries, tickets, deductions, webhooks, publish
//	costs      what one request costs Redis and Postgres
//	overload   1.5 × capacity offered open-loop on one core, and its generator (`overload-load …`)
//	report     the printed lines and the JSON file
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/floor"
	"gatehouse/cmd/gatehouse-bench/internal/overload"
	"gatehouse/cmd/gatehouse-bench/internal/report"
	"gatehouse/internal/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "baseline":
		err = floor.RunBaseline(ctx, os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "floor":
		err = floor.RunDrain(ctx, os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "overload-load":
		err = overload.RunLoad(ctx, os.Args[2:])
	default:
		err = run(ctx, os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var o bench.Options
	fs := flag.NewFlagSet("gatehouse-bench", flag.ContinueOnError)
	fs.StringVar(&o.Gatehouse, "gatehouse", "bin/gatehouse", "the gatehouse binary to measure")
	fs.StringVar(&o.Out, "out", "bin/bench.json", "where to write the figures as JSON")
	fs.DurationVar(&o.Phase, "phase", 4*time.Second, "measured duration of each load phase")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "unmeasured load before each phase")
	fs.IntVar(&o.Workers, "workers", 32, "concurrent client connections")
	fs.StringVar(&o.PostgresURL, "postgres", envOr("GATEHOUSE_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "Postgres server (a database is created and dropped); empty: skip")
	fs.StringVar(&o.RedisURL, "redis", envOr("GATEHOUSE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis server (a private key prefix is used); empty: skip")
	fs.StringVar(&o.Before, "before", "", "an earlier gatehouse binary: its webhook drain and isolation are measured too (embedded; adds minutes)")
	fs.BoolVar(&o.DeductOnly, "deduct-only", false, "measure only the signed deductions on Postgres + Redis and their floor (for A/B runs of that path)")
	fs.BoolVar(&o.PublishOnly, "publish-only", false, "measure only the publish lines on Postgres + Redis (publishWebhookEvent and POST /api/events against the INSERT + NOTIFY floor, then batches of 100)")
	fs.BoolVar(&o.WebhooksOnly, "webhooks-only", false, "measure only the webhook phases (drain, fan-out, isolation), embedded and on Postgres + Redis, against their floors")
	fs.BoolVar(&o.FanoutOnly, "fanout-only", false, "measure only the fan-out drain (publish → delivered, 5 endpoints), embedded and on Postgres + Redis, against the outbox floor")
	fs.BoolVar(&o.OverloadOnly, "overload-only", false, "measure only the overload phases: the ticket page and signed queries offered 1.5 × their capacity open-loop, embedded, the server on CPU 0 and the load on CPU 1")
	fs.DurationVar(&o.OverloadFor, "overload-duration", 15*time.Second, "how long each overload phase offers 1.5 × capacity (shorter for quick runs; the goals are defined for 15s)")
	fs.BoolVar(&o.SignedOnly, "signed-only", false, "measure only the signed order query and its floors (for A/B runs of that path)")
	fs.StringVar(&o.SQLiteSync, "sqlite-sync", bench.DefaultSQLiteSync, "GATEHOUSE_SQLITE_SYNC of the embedded gatehouse and the synchronous setting of its SQLite floors: full (the server's default) or normal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !slices.Contains(store.SQLiteSyncModes, o.SQLiteSync) {
		return fmt.Errorf("-sqlite-sync must be one of %s", strings.Join(store.SQLiteSyncModes, ", "))
	}
	if o.Phase <= 0 || o.Workers <= 0 {
		return fmt.Errorf("-phase and -workers must be positive")
	}
	started := time.Now()
	rep := report.New()
	rep.Machine["sqlite_sync"] = o.SQLiteSync
	rep.AddNonceFootprint()
	if err := benchmark(ctx, o, rep); err != nil {
		return err
	}
	rep.Elapsed = time.Since(started).Round(time.Millisecond).String()
	if err := rep.Write(o.Out); err != nil {
		return err
	}
	fmt.Printf("# figures written to %s (run took %s)\n", o.Out, rep.Elapsed)
	return nil
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
