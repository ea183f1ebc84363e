package phases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/costs"
	"gatehouse/cmd/gatehouse-bench/internal/floor"
	"gatehouse/cmd/gatehouse-bench/internal/gatehouse"
	"gatehouse/cmd/gatehouse-bench/internal/load"
	"gatehouse/cmd/gatehouse-bench/internal/proc"
	"gatehouse/cmd/gatehouse-bench/internal/report"
	"gatehouse/cmd/gatehouse-bench/internal/sink"
	"gatehouse/rest/partnerclient"
)

// sqliteSelectFloor names the embedded signed query's floor.
const sqliteSelectFloor = "minimal handler: nonce in memory + one SQLite SELECT"

// startSQLiteSelectFloor starts the sqlite-select baseline and returns its
// requests (one unique nonce each, enough for a phase at bareRPS).
func startSQLiteSelectFloor(ctx context.Context, o bench.Options, self, tmp string, bareRPS float64) (*proc.Proc, load.Source, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, load.Source{}, err
	}
	p, err := proc.Start(ctx, "baseline sqlite-select", self, []string{"baseline", "-mode", "sqlite-select", "-addr", addr, "-sqlite", tmp + "/baseline-select.db", "-sqlite-sync", o.SQLiteSync}, nil, addr, tmp)
	if err != nil {
		return nil, load.Source{}, err
	}
	list := make([]string, int(bareRPS*(o.Phase+o.Warmup).Seconds())+1000)
	for i := range list {
		list[i] = p.Base + "/q?order_no=" + gatehouse.OrderNo + "&nonce=" + bench.RandomHex(16)
	}
	return p, load.URLs(list), nil
}

// scaleOut measures signed v1 order queries spread evenly over replicas
// (the same app, one nonce each, every replica on the same Postgres and
// Redis).
func scaleOut(ctx context.Context, o bench.Options, c *http.Client, bareRPS float64, replicas ...*gatehouse.Process) (load.Result, error) {
	n := int(bareRPS*(o.Phase+o.Warmup).Seconds()) + 1000
	s := partnerclient.Signer{AppKey: replicas[0].AppKey, AppSecret: replicas[0].Secret}
	list := make([]string, n)
	for i := range list {
		u, err := s.SignURL(replicas[i%len(replicas)].Proc.Base + "/api/v1/orders/query?order_no=" + gatehouse.OrderNo)
		if err != nil {
			return load.Result{}, err
		}
		list[i] = u
	}
	return load.Measure(ctx, o, c, load.URLs(list)), nil
}

// redisPGFloor names the signed query's floor on Postgres + Redis.
const redisPGFloor = "minimal handler: one Redis SET NX + one Postgres SELECT"

// External measures gatehouse on Postgres + Redis against the
// minimal one-Redis-one-Postgres handler, on a database of its own.
func External(ctx context.Context, o bench.Options, rep *report.Report, self, tmp string, client *http.Client, bare load.Result) error {
	if o.PostgresURL == "" || o.RedisURL == "" {
		return fmt.Errorf("disabled (-postgres or -redis empty)")
	}
	admin, rdb, err := connectBackends(ctx, o)
	if err != nil {
		return err
	}
	defer admin.Close()
	defer rdb.Close()
	id := bench.RandomHex(4)
	dbName := "gatehouse_bench_" + id
	prefix := "gatehouse-bench:" + id + ":"
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(dctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
		deletePrefix(dctx, rdb, prefix)
	}()
	u, err := url.Parse(o.PostgresURL)
	if err != nil {
		return err
	}
	u.Path = "/" + dbName
	dbURL := u.String()

	g, err := gatehouse.Start(ctx, o, "gatehouse postgres", tmp, []string{
		"GATEHOUSE_DATA_DIR=" + tmp + "/data-pg", "GATEHOUSE_DATABASE_URL=" + dbURL,
		"GATEHOUSE_REDIS_URL=" + o.RedisURL, "GATEHOUSE_REDIS_PREFIX=" + prefix,
	})
	if err != nil {
		return err
	}
	defer g.Proc.Stop()
	// What one request costs Redis and Postgres (package costs), measured after
	// the ratio phases of the signed query and of the deductions.
	benchDB, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	defer benchDB.Close()
	r := &pgRun{o: o, rep: rep, client: client, bare: bare, self: self, tmp: tmp, dbURL: dbURL, prefix: prefix, g: g,
		sampler: costs.NewSampler(ctx, rdb, benchDB, dbName, g.Proc.Pid(), o.RedisURL, dbURL)}
	return r.run(ctx)
}

// connectBackends opens the Postgres server (its default database, to
// create the bench's own) and Redis, and checks that both answer.
func connectBackends(ctx context.Context, o bench.Options) (*sql.DB, *redis.Client, error) {
	admin, err := sql.Open("pgx", o.PostgresURL)
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := admin.PingContext(pctx); err != nil {
		admin.Close()
		return nil, nil, fmt.Errorf("postgres unreachable: %w", err)
	}
	ropt, err := redis.ParseURL(o.RedisURL)
	if err != nil {
		admin.Close()
		return nil, nil, err
	}
	rdb := redis.NewClient(ropt)
	if err := rdb.Ping(pctx).Err(); err != nil {
		admin.Close()
		rdb.Close()
		return nil, nil, fmt.Errorf("redis unreachable: %w", err)
	}
	return admin, rdb, nil
}

// pgRun is the state of the Postgres + Redis phases: the bench's own
// database and key prefix, the gatehouse process on them and the cost
// sampler watching it.
type pgRun struct {
	o                        bench.Options
	rep                      *report.Report
	client                   *http.Client
	bare                     load.Result
	self, tmp, dbURL, prefix string
	g                        *gatehouse.Process
	sampler                  *costs.Sampler
}

// run measures what o selects: one part (-fanout-only, -webhooks-only,
// -publish-only, -deduct-only), the signed query alone (-signed-only), or
// every Postgres + Redis line.
func (r *pgRun) run(ctx context.Context) error {
	o, rep, g, client, dbURL := r.o, r.rep, r.g, r.client, r.dbURL
	switch {
	case o.FanoutOnly:
		return fanoutPhase(ctx, rep, g, dbURL, "Postgres", r.self, r.tmp, []string{"-mode", "outbox-pg", "-postgres", dbURL})
	case o.WebhooksOnly:
		return webhookPhases(ctx, rep, g, dbURL, "Postgres", r.self, r.tmp, 200, []string{"-mode", "outbox-pg", "-postgres", dbURL})
	case o.PublishOnly:
		return publishPhases(ctx, o, rep, g, client, r.self, r.tmp, dbURL)
	case o.DeductOnly:
		return deductPhases(ctx, o, rep, g, client, r.bare, r.self, r.tmp, "Postgres", []string{"-mode", "update-pg", "-postgres", dbURL}, r.sampler)
	}
	baseLoad, signed, g2, err := r.signed(ctx)
	if err != nil {
		return err
	}
	if o.SignedOnly {
		if rss, err := g.Proc.PeakRSS(); err == nil {
			rep.Scalar("peak RSS, gatehouse on Postgres + Redis after its signed phase", float64(rss)/(1<<20), "MiB", "", 0)
		}
		if err := g2.Proc.Stop(); err != nil {
			return err
		}
		return r.signedCosts(ctx)
	}
	pair, err := scaleOut(ctx, o, client, r.bare.RPS, g, g2)
	if err := errors.Join(err, g2.Proc.Stop()); err != nil {
		return err
	}
	rep.Add("signed v1 order query, 2 replicas, Postgres + Redis", pair, "one replica (the line above)", signed)
	if err := r.signedCosts(ctx); err != nil {
		return err
	}
	return r.rest(ctx, baseLoad)
}

// signed measures the signed query in turns with its floor, then traced,
// and returns the floor's and gatehouse's loads and a second replica,
// started (and idle) before the one-replica figure so that the pair is
// measured right after it.
func (r *pgRun) signed(ctx context.Context) (baseLoad, signed load.Result, g2 *gatehouse.Process, err error) {
	o, g := r.o, r.g
	addr, err := proc.FreeAddr()
	if err != nil {
		return baseLoad, signed, nil, err
	}
	base, err := proc.Start(ctx, "baseline redis-pg", r.self, []string{"baseline", "-mode", "redis-pg", "-addr", addr,
		"-postgres", r.dbURL, "-redis", o.RedisURL, "-prefix", r.prefix + "baseline:"}, nil, addr, r.tmp)
	if err != nil {
		return baseLoad, signed, nil, err
	}
	n := int(r.bare.RPS*(o.Phase+o.Warmup).Seconds()) + 1000
	floorURLs := func() load.Source {
		list := make([]string, n)
		for i := range list {
			list[i] = base.Base + "/q?order_no=" + gatehouse.OrderNo + "&nonce=" + bench.RandomHex(16)
		}
		return load.URLs(list)
	}
	floor := floorURLs()
	g2, err = g.Replica(ctx, o, "gatehouse postgres replica 2", r.tmp)
	if err != nil {
		_ = base.Stop()
		return baseLoad, signed, nil, err
	}
	signedList, err := g.Presign(n)
	if err != nil {
		_ = base.Stop()
		_ = g2.Proc.Stop()
		return baseLoad, signed, nil, err
	}
	// The floor and gatehouse in turns (load.MeasurePair).
	baseLoad, signed = load.MeasurePair(ctx, o, r.client, floor, load.URLs(signedList))
	r.rep.Baselines[redisPGFloor] = baseLoad
	r.rep.Add("signed v1 order query, Postgres + Redis", signed, redisPGFloor, baseLoad)
	// The same with tracing on, against the same floor measured anew.
	const pgTraced = "signed v1 order query, Postgres + Redis" + tracedSuffix
	if err := tracedPhase(ctx, o, r.client, pgTraced, func(env []string) (*gatehouse.Process, error) {
		return g.Replica(ctx, o, "gatehouse postgres traced", r.tmp, env...)
	}, floorURLs, n, redisPGFloor, r.rep); err != nil {
		r.rep.Skip(pgTraced, err.Error())
	}
	if err := base.Stop(); err != nil {
		_ = g2.Proc.Stop()
		return baseLoad, signed, nil, err
	}
	return baseLoad, signed, g2, nil
}

// signedCosts measures what a signed query costs the backends.
func (r *pgRun) signedCosts(ctx context.Context) error {
	// Enough for both cost phases (costs.Phases).
	list, err := r.g.Presign(2*int(r.bare.RPS*costs.PhaseTime(r.o).Seconds()) + 1000)
	if err != nil {
		return err
	}
	costs.Phases(ctx, r.o, r.client, r.rep, r.sampler, "signed v1 order query, Postgres + Redis", load.URLs(list))
	return nil
}

// rest measures tickets, deductions, webhooks and publishing on
// Postgres + Redis, then the process's peak RSS.
func (r *pgRun) rest(ctx context.Context, baseLoad load.Result) error {
	o, rep, g, dbURL := r.o, r.rep, r.g, r.dbURL
	if err := ticketPhases(ctx, o, rep, g, r.client, r.self, r.tmp, "Postgres", []string{"-mode", "insert-pg", "-postgres", dbURL},
		redisPGFloor, baseLoad); err != nil {
		return err
	}
	if err := deductPhases(ctx, o, rep, g, r.client, r.bare, r.self, r.tmp, "Postgres", []string{"-mode", "update-pg", "-postgres", dbURL}, r.sampler); err != nil {
		return err
	}
	if err := webhookPhases(ctx, rep, g, dbURL, "Postgres", r.self, r.tmp, 200, []string{"-mode", "outbox-pg", "-postgres", dbURL}); err != nil {
		return err
	}
	if err := publishPhases(ctx, o, rep, g, r.client, r.self, r.tmp, dbURL); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	rss, err := g.Proc.PeakRSS()
	if err == nil {
		rep.Scalar("peak RSS, gatehouse on Postgres + Redis after its load phases", float64(rss)/(1<<20), "MiB", "", 0)
	}
	return nil
}

// deletePrefix removes the run's Redis keys (nonces, windows).
func deletePrefix(ctx context.Context, rdb *redis.Client, prefix string) {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			rdb.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
}

// deductPhases measures signed stock deductions (quantity 1, a new biz_no
// each) on one hot SKU and spread over floor.SKUs SKUs, against a baseline
// process doing the plain conditional single-row UPDATE per request
// (baselineArgs) on its own table in the same kind of database. With
// sampler, a last phase measures what a deduction spread over the SKUs
// costs the backends.
func deductPhases(ctx context.Context, o bench.Options, rep *report.Report, g *gatehouse.Process, c *http.Client, bare load.Result, self, tmp, label string, baselineArgs []string, sampler *costs.Sampler) (err error) {
	var skus []string
	for i := range floor.SKUs {
		var out struct{ CreateSku struct{ ID string } }
		if err := g.GraphQL(ctx, fmt.Sprintf(`mutation { createSku(input: {name: "bench sku %d", stock: 1000000000}) { id } }`, i+1), &out); err != nil {
			return err
		}
		skus = append(skus, out.CreateSku.ID)
	}
	addr, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	base, err := proc.Start(ctx, "baseline update "+label, self, append([]string{"baseline", "-addr", addr}, baselineArgs...), nil, addr, tmp)
	if err != nil {
		return err
	}
	// The floor runs through both phases: each is measured in turns with
	// gatehouse (measurePair). A floor that does not stop cleanly is
	// reported, as before.
	defer func() { err = errors.Join(err, base.Stop()) }()
	baseName := "plain conditional UPDATE per request, " + label

	n := int(bare.RPS*(o.Phase+o.Warmup).Seconds()/2) + 1000
	s := partnerclient.Signer{AppKey: g.AppKey, AppSecret: g.Secret}
	for _, ph := range []struct {
		name   string
		spread int
		suffix string
	}{{"one hot SKU", 1, ", one row"}, {"100 SKUs", floor.SKUs, ", 100 rows"}} {
		list := make([]string, n)
		run := bench.RandomHex(4)
		for i := range list {
			u, err := s.SignURL(fmt.Sprintf("%s/api/v1/inventory/deduct?biz_no=B-%s-%d&sku_id=%s&quantity=1", g.Proc.Base, run, i, skus[i%ph.spread]))
			if err != nil {
				return err
			}
			list[i] = u
		}
		phaseSkus := skus[:ph.spread]
		before, err := g.SKUStocks(ctx, phaseSkus)
		if err != nil {
			return err
		}
		// The warm-up's requests are counted too, for the stock check.
		floor, l, warm := load.MeasurePairWarm(ctx, o, c, load.Cycle(base.Base+"/d?sku_id=%d", ph.spread), load.URLsWith(http.MethodPost, list))
		rep.Baselines[baseName+ph.suffix] = floor
		name := "signed deduction, " + ph.name + ", " + label
		rep.Add(name, l, baseName+ph.suffix, floor)
		msg, err := checkDeductions(ctx, g, c, phaseSkus, before, warm.Requests+l.Requests, warm.Errors+l.Errors, run, 50)
		if err != nil {
			return fmt.Errorf("%s: correctness check failed: %w", name, err)
		}
		rep.Check(name, msg)
	}
	if sampler != nil {
		list := make([]string, int(bare.RPS*costs.PhaseTime(o).Seconds())+1000) // both cost phases
		run := bench.RandomHex(4)
		for i := range list {
			u, err := s.SignURL(fmt.Sprintf("%s/api/v1/inventory/deduct?biz_no=C-%s-%d&sku_id=%s&quantity=1", g.Proc.Base, run, i, skus[i%floor.SKUs]))
			if err != nil {
				return err
			}
			list[i] = u
		}
		costs.Phases(ctx, o, c, rep, sampler, "signed deduction, 100 SKUs, "+label, load.URLsWith(http.MethodPost, list))
	}
	return nil
}

// tracedSuffix ends the name of a signed-query line with tracing on.
const tracedSuffix = ", tracing on (all sampled, OTLP/HTTP to a discarding sink)"

// tracedPhase measures the signed query on a gatehouse process started
// by start with tracing on (every request sampled, its spans exported to
// a discarding OTLP/HTTP sink: the extra environment start gets), in
// turns with a fresh run of the floor, and stops that process.
func tracedPhase(ctx context.Context, o bench.Options, client *http.Client, name string, start func(env []string) (*gatehouse.Process, error), floor func() load.Source, n int, floorName string, rep *report.Report) error {
	otlp, err := sink.StartOTLP()
	if err != nil {
		return err
	}
	defer otlp.Close()
	tr, err := start(otlp.TracingEnv())
	if err != nil {
		return err
	}
	list, err := tr.Presign(n)
	if err != nil {
		_ = tr.Proc.Stop()
		return err
	}
	floorLoad, traced, warm := load.MeasurePairWarm(ctx, o, client, floor(), load.URLs(list))
	if err := tr.Proc.Stop(); err != nil { // flushes its last spans
		return err
	}
	rep.Add(name, traced, floorName, floorLoad)
	if otlp.Exports.Load() == 0 {
		return fmt.Errorf("the traced gatehouse exported nothing to the sink")
	}
	fmt.Printf("%-58s %d exports, %.1f MiB (%.0f bytes per request)\n", "  its discarding OTLP sink received", otlp.Exports.Load(),
		float64(otlp.Bytes.Load())/(1<<20), float64(otlp.Bytes.Load())/float64(max(1, traced.Requests+warm.Requests)))
	return nil
}
