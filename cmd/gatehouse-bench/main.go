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

	"gatehouse/internal/config"
	"gatehouse/internal/store"
)

// defaultSQLiteSync is the server's default GATEHOUSE_SQLITE_SYNC: the
// floors run with it unless told otherwise.
var defaultSQLiteSync = config.Defaults().Database.SQLiteSync

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "baseline":
		err = runBaseline(ctx, os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "floor":
		err = runFloor(ctx, os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "overload-load":
		err = runOverloadLoad(ctx, os.Args[2:])
	default:
		err = run(ctx, os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse-bench:", err)
		os.Exit(1)
	}
}

// options are the command-line settings.
type options struct {
	gatehouse   string
	out         string
	phase       time.Duration
	warmup      time.Duration
	workers     int
	postgresURL string
	redisURL    string
	// before is an earlier gatehouse binary whose webhook figures are
	// measured in the same run (embedded only), for before/after.
	before string
	// signedOnly measures the signed order query and its floors only.
	signedOnly bool
	// deductOnly measures the Postgres deduction phases and their floor only.
	deductOnly bool
	// publishOnly measures the webhook publishing phases (Postgres) only.
	publishOnly bool
	// fanoutOnly measures the fan-out drain only, on both backends;
	// webhooksOnly every webhook phase (drain, fan-out, isolation).
	fanoutOnly, webhooksOnly bool
	// binary overrides gatehouse for one startGatehouse (the -before runs).
	binary string
	// pinCPU, when set, runs one startGatehouse under `taskset -c pinCPU`
	// with GOMAXPROCS=1 (the overload phases).
	pinCPU string
	// overloadOnly measures only the overload phases (overload.go);
	// overloadFor is how long each offers 1.5 × its capacity.
	overloadOnly bool
	overloadFor  time.Duration
	// sqliteSync is GATEHOUSE_SQLITE_SYNC of every embedded gatehouse
	// and the synchronous setting of every SQLite floor, so both pay for
	// the same durability.
	sqliteSync string
}

func run(ctx context.Context, args []string) error {
	var o options
	fs := flag.NewFlagSet("gatehouse-bench", flag.ContinueOnError)
	fs.StringVar(&o.gatehouse, "gatehouse", "bin/gatehouse", "the gatehouse binary to measure")
	fs.StringVar(&o.out, "out", "bin/bench.json", "where to write the figures as JSON")
	fs.DurationVar(&o.phase, "phase", 4*time.Second, "measured duration of each load phase")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each phase")
	fs.IntVar(&o.workers, "workers", 32, "concurrent client connections")
	fs.StringVar(&o.postgresURL, "postgres", envOr("GATEHOUSE_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "Postgres server (a database is created and dropped); empty: skip")
	fs.StringVar(&o.redisURL, "redis", envOr("GATEHOUSE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis server (a private key prefix is used); empty: skip")
	fs.StringVar(&o.before, "before", "", "an earlier gatehouse binary: its webhook drain and isolation are measured too (embedded; adds minutes)")
	fs.BoolVar(&o.deductOnly, "deduct-only", false, "measure only the signed deductions on Postgres + Redis and their floor (for A/B runs of that path)")
	fs.BoolVar(&o.publishOnly, "publish-only", false, "measure only the publish lines on Postgres + Redis (publishWebhookEvent and POST /api/events against the INSERT + NOTIFY floor, then batches of 100)")
	fs.BoolVar(&o.webhooksOnly, "webhooks-only", false, "measure only the webhook phases (drain, fan-out, isolation), embedded and on Postgres + Redis, against their floors")
	fs.BoolVar(&o.fanoutOnly, "fanout-only", false, "measure only the fan-out drain (publish → delivered, 5 endpoints), embedded and on Postgres + Redis, against the outbox floor")
	fs.BoolVar(&o.overloadOnly, "overload-only", false, "measure only the overload phases: the ticket page and signed queries offered 1.5 × their capacity open-loop, embedded, the server on CPU 0 and the load on CPU 1")
	fs.DurationVar(&o.overloadFor, "overload-duration", 15*time.Second, "how long each overload phase offers 1.5 × capacity (shorter for quick runs; the goals are defined for 15s)")
	fs.BoolVar(&o.signedOnly, "signed-only", false, "measure only the signed order query and its floors (for A/B runs of that path)")
	fs.StringVar(&o.sqliteSync, "sqlite-sync", defaultSQLiteSync, "GATEHOUSE_SQLITE_SYNC of the embedded gatehouse and the synchronous setting of its SQLite floors: full (the server's default) or normal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !slices.Contains(store.SQLiteSyncModes, o.sqliteSync) {
		return fmt.Errorf("-sqlite-sync must be one of %s", strings.Join(store.SQLiteSyncModes, ", "))
	}
	if o.phase <= 0 || o.workers <= 0 {
		return fmt.Errorf("-phase and -workers must be positive")
	}
	started := time.Now()
	rep := newReport()
	rep.Machine["sqlite_sync"] = o.sqliteSync
	rep.addNonceFootprint()
	if err := benchmark(ctx, o, rep); err != nil {
		return err
	}
	rep.Elapsed = time.Since(started).Round(time.Millisecond).String()
	if err := rep.write(o.out); err != nil {
		return err
	}
	fmt.Printf("# figures written to %s (run took %s)\n", o.out, rep.Elapsed)
	return nil
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
