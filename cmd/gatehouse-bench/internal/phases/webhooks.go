package phases

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/gatehouse"
	"gatehouse/cmd/gatehouse-bench/internal/load"
	"gatehouse/cmd/gatehouse-bench/internal/proc"
	"gatehouse/cmd/gatehouse-bench/internal/report"
	"gatehouse/cmd/gatehouse-bench/internal/sink"
	"gatehouse/internal/store"
)

// Sizes of the webhook phases.
const (
	drainDeliveries = 5000 // queued at once, spread over drainApps apps
	drainApps       = 8    // enough that the per-app cap (4) is not the bound
	drainWorkers    = 16   // gatehouse's dispatcher workers: the floors use as many
	drainRounds     = 3    // drain and floors alternate this many times
	hangingQueued   = 100  // deliveries queued for the app whose endpoint hangs
)

// webhookBench is the state of the webhook phases of one gatehouse
// process: its database (the harness queues deliveries straight into the
// outbox table, as a business transaction would) and the sink.
type webhookBench struct {
	g       *gatehouse.Process
	sink    *sink.Sink
	dialect string // "sqlite" or "postgres"
	db      *sql.DB
	label   string  // "SQLite" or "Postgres"
	apps    []int64 // the drain's apps
	fanApps []int64 // the fan-out's apps (fanoutEndpoints endpoints each)
}

// webhookPhases measures, on g (started with private callbacks allowed):
// draining drainDeliveries queued deliveries against the two floors (a bare
// Go client POSTing to the same sink, the minimal outbox loop on the same
// kind of database), and the first-attempt delay of another app's events
// while one app's endpoint hangs, against the same without the hang.
// floorArgs selects the outbox floor's database.
func webhookPhases(ctx context.Context, rep *report.Report, g *gatehouse.Process, dbURL, label, self, tmp string, probes int, floorArgs []string) error {
	s, err := sink.Start()
	if err != nil {
		return err
	}
	defer s.Close()
	w := &webhookBench{g: g, sink: s, label: label}
	if w.db, w.dialect, err = openOutbox(dbURL, g.SQLiteSync); err != nil {
		return err
	}
	defer w.db.Close()

	floor := func(name string, args ...string) (float64, error) { return w.floor(ctx, self, tmp, name, args...) }
	// The drain, the fan-out (the same number of deliveries, made by
	// events of apps with five endpoints each) and the two floors
	// alternate, three times, and each figure is the median of its three:
	// the machine's load changes from second to second, and a ratio of
	// figures taken minutes apart would measure that.
	var drains, fans, outboxes, bares []float64
	for range drainRounds {
		drain, err := w.drain(ctx)
		if err != nil {
			return fmt.Errorf("webhook drain: %w", err)
		}
		fan, err := w.fanout(ctx)
		if err != nil {
			return fmt.Errorf("webhook fan-out: %w", err)
		}
		outbox, err := floor("floor outbox "+label, floorArgs...)
		if err != nil {
			return fmt.Errorf("outbox floor: %w", err)
		}
		bare, err := floor("floor post", "-mode", "post")
		if err != nil {
			return fmt.Errorf("bare POST floor: %w", err)
		}
		drains, fans, outboxes, bares = append(drains, drain), append(fans, fan), append(outboxes, outbox), append(bares, bare)
	}
	drain, fan, outbox, bare := median(drains), median(fans), median(outboxes), median(bares)
	fmt.Printf("  (%s rounds, deliveries/s: gatehouse drain %.0f, fan-out %.0f, outbox floor %.0f, bare POST %.0f)\n", label, drains, fans, outboxes, bares)
	outboxName := "minimal outbox loop (claim SKIP LOCKED, POST, one UPDATE), " + label
	bareName := "bare Go client POSTing to the same sink"
	rep.Baselines[outboxName] = load.Result{Requests: drainDeliveries, RPS: outbox}
	rep.Baselines[bareName+", "+label] = load.Result{Requests: drainDeliveries, RPS: bare}
	name := fmt.Sprintf("webhook drain, %d queued over %d apps, %s", drainDeliveries, drainApps, label)
	rep.Add(name, load.Result{Requests: drainDeliveries, RPS: drain}, outboxName, load.Result{RPS: outbox})
	rep.Add(name+" (vs bare POST)", load.Result{Requests: drainDeliveries, RPS: drain}, bareName, load.Result{RPS: bare})
	rep.Add(fmt.Sprintf("publish → delivered, %d endpoints, %d events over %d apps, %s", fanoutEndpoints, fanoutEvents, drainApps, label),
		load.Result{Requests: drainDeliveries, RPS: fan}, outboxName, load.Result{RPS: outbox})

	calm, hung, err := w.isolation(ctx, probes)
	if err != nil {
		return fmt.Errorf("webhook isolation: %w", err)
	}
	rep.Scalar(fmt.Sprintf("another app's event → first attempt p99, no backlog, %s", label), sink.Percentile(calm, 0.99), "ms", "", 0)
	rep.Scalar(fmt.Sprintf("same while one app hangs with %d queued, %s", hangingQueued, label), sink.Percentile(hung, 0.99), "ms",
		"no backlog", sink.Percentile(calm, 0.99))
	fmt.Printf("  (p50 %.1f ms → %.1f ms, max %.1f ms; %d events each)\n", sink.Percentile(calm, 0.5), sink.Percentile(hung, 0.5), sink.Percentile(hung, 1), len(hung))
	return nil
}

// floor runs one floor of the drain (gatehouse-bench floor …) to the sink
// and returns its deliveries/s.
func (w *webhookBench) floor(ctx context.Context, self, tmp, name string, args ...string) (float64, error) {
	s := w.sink
	s.Reset()
	p, err := proc.StartJob(ctx, name, self, append([]string{"floor", "-sink", s.Base + "/ok", "-n", fmt.Sprint(drainDeliveries), "-workers", fmt.Sprint(drainWorkers)}, args...), tmp)
	if err != nil {
		return 0, err
	}
	rate, err := s.WaitArrivals(ctx, drainDeliveries, 2*time.Minute)
	if werr := p.Wait(); err == nil {
		err = werr
	}
	return rate, err
}

// fanoutPhase is the fan-out line alone (-fanout-only, -publish-only):
// fan-out runs and runs of the outbox floor in turns, drainRounds times,
// each figure the median of its runs (as in webhookPhases).
func fanoutPhase(ctx context.Context, rep *report.Report, g *gatehouse.Process, dbURL, label, self, tmp string, floorArgs []string) error {
	s, err := sink.Start()
	if err != nil {
		return err
	}
	defer s.Close()
	w := &webhookBench{g: g, sink: s, label: label}
	if w.db, w.dialect, err = openOutbox(dbURL, g.SQLiteSync); err != nil {
		return err
	}
	defer w.db.Close()
	var fans, outboxes []float64
	for range drainRounds {
		fan, err := w.fanout(ctx)
		if err != nil {
			return fmt.Errorf("webhook fan-out: %w", err)
		}
		outbox, err := w.floor(ctx, self, tmp, "floor outbox "+label, floorArgs...)
		if err != nil {
			return fmt.Errorf("outbox floor: %w", err)
		}
		fans, outboxes = append(fans, fan), append(outboxes, outbox)
	}
	fan, outbox := median(fans), median(outboxes)
	fmt.Printf("  (%s rounds, deliveries/s: fan-out %.0f, outbox floor %.0f)\n", label, fans, outboxes)
	outboxName := "minimal outbox loop (claim SKIP LOCKED, POST, one UPDATE), " + label
	rep.Baselines[outboxName] = load.Result{Requests: drainDeliveries, RPS: outbox}
	rep.Add(fmt.Sprintf("publish → delivered, %d endpoints, %d events over %d apps, %s", fanoutEndpoints, fanoutEvents, drainApps, label),
		load.Result{Requests: drainDeliveries, RPS: fan}, outboxName, load.Result{RPS: outbox})
	return nil
}

// median of a few figures.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// drain queues drainDeliveries deliveries in one transaction and returns
// the rate at which they reach the sink (first to last arrival).
func (w *webhookBench) drain(ctx context.Context) (float64, error) {
	for i := len(w.apps); i < drainApps; i++ {
		id, err := w.g.App(ctx, fmt.Sprintf("drain %d", i), w.sink.Base+"/ok")
		if err != nil {
			return 0, err
		}
		w.apps = append(w.apps, id)
	}
	apps := w.apps
	w.sink.Reset()
	if err := w.queue(ctx, apps, drainDeliveries, w.sink.Base+"/ok"); err != nil {
		return 0, err
	}
	return w.sink.WaitArrivals(ctx, drainDeliveries, 2*time.Minute)
}

// isolation measures events of a fresh app one at a time (payOrder, then
// its first attempt at the sink): probes without backlog, then as many
// while another app's endpoint hangs with hangingQueued deliveries queued.
func (w *webhookBench) isolation(ctx context.Context, probes int) (calm, hung []time.Duration, err error) {
	probe, err := w.g.App(ctx, "probe", w.sink.Base+"/probe")
	if err != nil {
		return nil, nil, err
	}
	run := func(tag string) ([]time.Duration, error) {
		w.sink.Reset()
		start := w.sink.Probes.Load()
		for i := range probes {
			no := fmt.Sprintf("P-%s-%d-%s", tag, i, bench.RandomHex(3))
			if err := w.g.GraphQL(ctx, fmt.Sprintf(`mutation { createOrder(input: {appID: "%d", orderNo: "%s", amount: "1.00"}) { id } }`, probe, no), nil); err != nil {
				return nil, err
			}
			if err := w.g.GraphQL(ctx, fmt.Sprintf(`mutation { payOrder(orderNo: "%s") { status } }`, no), nil); err != nil {
				return nil, err
			}
			if err := sink.WaitFor(ctx, 2*time.Minute, func() bool { return w.sink.Probes.Load() >= start+int64(i+1) }); err != nil {
				return nil, fmt.Errorf("event %d of the probe app never arrived", i+1)
			}
		}
		return w.sink.ProbeDelays(), nil
	}
	if calm, err = run("calm"); err != nil {
		return nil, nil, err
	}
	hangApp, err := w.g.App(ctx, "hanging", w.sink.Base+"/hang")
	if err != nil {
		return nil, nil, err
	}
	if err := w.queue(ctx, []int64{hangApp}, hangingQueued, w.sink.Base+"/hang"); err != nil {
		return nil, nil, err
	}
	defer w.sink.Release()
	if err := sink.WaitFor(ctx, 30*time.Second, func() bool { return w.sink.Hanging.Load() >= 1 }); err != nil {
		return nil, nil, fmt.Errorf("the hanging app's attempts did not start")
	}
	hung, err = run("hung")
	return calm, hung, err
}

// queue writes n PENDING deliveries, round robin over apps, in one
// transaction of multi-row INSERTs, with the columns every release of the
// schema has; on Postgres it then announces the work (NOTIFY) as gatehouse
// does when it queues events itself.
func (w *webhookBench) queue(ctx context.Context, apps []int64, n int, url string) error {
	// Each delivery belongs to its app's first webhook endpoint (the one
	// its callback URL made), as gatehouse queues them: the dispatcher
	// claims deliveries per endpoint, and one without an endpoint is
	// never sent. A gatehouse from before endpoints (-before) has no such
	// table: its deliveries have none.
	endpoint := map[int64]any{}
	for _, id := range apps {
		var ep sql.NullInt64
		err := w.db.QueryRowContext(ctx, `SELECT min(id) FROM webhook_endpoints WHERE app_id = $1`, id).Scan(&ep)
		if err != nil {
			break
		}
		if !ep.Valid {
			return fmt.Errorf("app %d has no webhook endpoint", id)
		}
		endpoint[id] = ep.Int64
	}
	cols, ph := "", ""
	if len(endpoint) == len(apps) {
		cols, ph = ", endpoint_id", ", $%d"
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	now := time.Now().UTC().Truncate(time.Microsecond)
	biz := `{"order_no":"SO1001","amount":99.90,"status":"PAID","create_time":"2026-11-22T10:43:47.120Z","pay_time":"2026-11-22T10:43:58.278Z"}`
	for i := 0; i < n; i += 200 {
		var q strings.Builder
		q.WriteString(`INSERT INTO webhook_deliveries (app_id, event_id, event_type, biz_data, callback_url, status, retry_count, max_retry, next_attempt_at, create_time, update_time` + cols + `) VALUES `)
		var args []any
		for j := i; j < min(i+200, n); j++ {
			if j > i {
				q.WriteString(", ")
			}
			k := len(args)
			app := apps[j%len(apps)]
			if cols == "" {
				fmt.Fprintf(&q, "($%d, $%d, 'bench.event', $%d, $%d, 'PENDING', 0, 5, $%d, $%d, $%d)", k+1, k+2, k+3, k+4, k+5, k+6, k+7)
				args = append(args, app, bench.EventID(), biz, url, now, now, now)
				continue
			}
			fmt.Fprintf(&q, "($%d, $%d, 'bench.event', $%d, $%d, 'PENDING', 0, 5, $%d, $%d, $%d"+ph+")", k+1, k+2, k+3, k+4, k+5, k+6, k+7, k+8)
			args = append(args, app, bench.EventID(), biz, url, now, now, now, endpoint[app])
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	if w.dialect == "postgres" {
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify('gatehouse_webhook_work', '')`); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// openOutbox opens gatehouse's database as the harness's second writer,
// with gatehouse's SQLite settings (sync: its GATEHOUSE_SQLITE_SYNC).
func openOutbox(url, sync string) (*sql.DB, string, error) {
	if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
		db, err := sql.Open("sqlite", store.SQLiteDSN(path, sync))
		return db, "sqlite", err
	}
	db, err := sql.Open("pgx", url)
	return db, "postgres", err
}

// Before measures the webhook figures of an earlier gatehouse binary
// (-before) on the embedded store, in the same run: the drain against the
// same floors, and a few isolation probes (before per-app isolation each
// probe could wait for every hanging attempt ahead of it).
func Before(ctx context.Context, o bench.Options, rep *report.Report, self, tmp string) error {
	ob := o
	ob.Binary = o.Before
	dataDir := tmp + "/data-before"
	g, err := gatehouse.Start(ctx, ob, "gatehouse before", tmp, []string{"GATEHOUSE_DATA_DIR=" + dataDir})
	if err != nil {
		return err
	}
	defer g.Proc.Stop() //nolint:errcheck // measured already
	return webhookPhases(ctx, rep, g, "sqlite:"+dataDir+"/gatehouse.db", "SQLite, -before binary", self, tmp, 3,
		[]string{"-mode", "outbox-sqlite", "-sqlite", tmp + "/floor-outbox-before.db", "-sqlite-sync", o.SQLiteSync})
}
