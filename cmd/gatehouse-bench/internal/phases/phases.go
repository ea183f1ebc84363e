package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/benchfloor"
	"gatehouse/rest/partnerclient"
)

// orderNo is the order every query asks for.
const orderNo = benchfloor.OrderNo

// benchmark runs every phase and fills rep.
func benchmark(ctx context.Context, o options, rep *report) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.gatehouse); err != nil {
		return fmt.Errorf("gatehouse binary: %w (run make build)", err)
	}
	tmp, err := os.MkdirTemp("", "gatehouse-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.overloadOnly {
		return overloadPhases(ctx, o, rep, self, tmp)
	}
	client := newClient(o.workers)

	// Baseline 1: the bare net/http JSON handler.
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	bare, err := startProc(ctx, "baseline bare", self, []string{"baseline", "-mode", "bare", "-addr", addr}, nil, addr, tmp)
	if err != nil {
		return err
	}
	bareLoad := measure(ctx, o, client, repeatURL(bare.base+"/q?order_no="+orderNo))
	bareRSS, _ := bare.peakRSS()
	bareStart := bare.startup
	if err := bare.stop(); err != nil {
		return err
	}
	rep.Baselines["bare net/http JSON handler"] = bareLoad
	if o.fanoutOnly || o.webhooksOnly {
		emb, err := startGatehouse(ctx, o, "gatehouse embedded", tmp, []string{"GATEHOUSE_DATA_DIR=" + tmp + "/data"})
		if err != nil {
			return err
		}
		floorArgs := []string{"-mode", "outbox-sqlite", "-sqlite", tmp + "/floor-outbox.db", "-sqlite-sync", o.sqliteSync}
		if o.webhooksOnly {
			err = webhookPhases(ctx, rep, emb, "sqlite:"+tmp+"/data/gatehouse.db", "SQLite", self, tmp, 200, floorArgs)
		} else {
			err = fanoutPhase(ctx, rep, emb, "sqlite:"+tmp+"/data/gatehouse.db", "SQLite", self, tmp, floorArgs)
		}
		if serr := emb.proc.stop(); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
	}
	if o.deductOnly || o.publishOnly || o.fanoutOnly || o.webhooksOnly {
		if err := externalPhases(ctx, o, rep, self, tmp, client, bareLoad); err != nil {
			rep.skip("Postgres + Redis figures", err.Error())
		}
		return nil
	}

	// gatehouse, embedded, measured in turns with the embedded signed
	// query's floor (nonce in memory, one SQLite SELECT of the order row).
	selectFloor, selectSrc, err := startSQLiteSelectFloor(ctx, o, self, tmp, bareLoad.RPS)
	if err != nil {
		return err
	}
	dataDir := tmp + "/data"
	emb, err := startGatehouse(ctx, o, "gatehouse embedded", tmp, []string{"GATEHOUSE_DATA_DIR=" + dataDir})
	if err != nil {
		_ = selectFloor.stop()
		return err
	}
	embStart := emb.proc.startup
	signedList, err := emb.presign(int(bareLoad.RPS*(o.phase+o.warmup).Seconds()) + 1000)
	if err != nil {
		_ = selectFloor.stop()
		_ = emb.proc.stop()
		return err
	}
	selectLoad, embLoad := measurePair(ctx, o, client, selectSrc, urls(signedList))
	rep.Baselines[sqliteSelectFloor] = selectLoad
	rep.add("signed v1 order query, SQLite + memory", embLoad, sqliteSelectFloor, selectLoad)
	// The same with tracing on: a process of its own (a data dir of its
	// own, seeded alike), against the same floor measured anew.
	const embTraced = "signed v1 order query, SQLite + memory" + tracedSuffix
	if err := tracedPhase(ctx, o, client, embTraced, func(env []string) (*gatehouse, error) {
		return startGatehouse(ctx, o, "gatehouse embedded traced", tmp, append([]string{"GATEHOUSE_DATA_DIR=" + tmp + "/data-traced"}, env...))
	}, func() source {
		fresh := make([]string, len(signedList))
		for i := range fresh {
			fresh[i] = selectFloor.base + "/q?order_no=" + orderNo + "&nonce=" + randomHex(16)
		}
		return urls(fresh)
	}, len(signedList), sqliteSelectFloor, rep); err != nil {
		rep.skip(embTraced, err.Error())
	}
	if err := selectFloor.stop(); err != nil {
		_ = emb.proc.stop()
		return err
	}
	if o.signedOnly {
		if err := emb.proc.stop(); err != nil {
			return err
		}
		if err := externalPhases(ctx, o, rep, self, tmp, client, bareLoad); err != nil {
			rep.skip("Postgres + Redis figures", err.Error())
		}
		return nil
	}
	if err := ticketPhases(ctx, o, rep, emb, client, self, tmp, "SQLite", []string{"-mode", "insert-sqlite", "-sqlite", tmp + "/baseline-insert.db", "-sqlite-sync", o.sqliteSync},
		"bare net/http JSON handler", bareLoad); err != nil {
		_ = emb.proc.stop()
		return err
	}
	if err := deductPhases(ctx, o, rep, emb, client, bareLoad, self, tmp, "SQLite", []string{"-mode", "update-sqlite", "-sqlite", tmp + "/baseline-update.db", "-sqlite-sync", o.sqliteSync}, nil); err != nil {
		_ = emb.proc.stop()
		return err
	}
	if err := webhookPhases(ctx, rep, emb, "sqlite:"+dataDir+"/gatehouse.db", "SQLite", self, tmp, 200,
		[]string{"-mode", "outbox-sqlite", "-sqlite", tmp + "/floor-outbox.db", "-sqlite-sync", o.sqliteSync}); err != nil {
		_ = emb.proc.stop()
		return err
	}
	embRSS, err := emb.proc.peakRSS()
	if err != nil {
		return err
	}
	if err := emb.proc.stop(); err != nil {
		return fmt.Errorf("gatehouse embedded did not stop cleanly: %w", err)
	}
	rep.scalar("embedded start-up time (exec to /healthz 200, fresh data dir)", float64(embStart.Microseconds())/1000, "ms",
		"bare net/http JSON handler", float64(bareStart.Microseconds())/1000)
	rep.scalar("peak RSS, gatehouse embedded after its load phases", float64(embRSS)/(1<<20), "MiB",
		"bare net/http JSON handler", float64(bareRSS)/(1<<20))

	if err := overloadPhases(ctx, o, rep, self, tmp); err != nil {
		rep.skip("overload phases", err.Error())
	}

	if o.before != "" {
		if err := beforePhases(ctx, o, rep, self, tmp); err != nil {
			rep.skip("webhook figures of the -before binary", err.Error())
		}
	}

	// gatehouse on Postgres + Redis, against the one-Redis-one-Postgres baseline.
	if err := externalPhases(ctx, o, rep, self, tmp, client, bareLoad); err != nil {
		rep.skip("Postgres + Redis figures", err.Error())
	}
	return nil
}

// sqliteSelectFloor names the embedded signed query's floor.
const sqliteSelectFloor = "minimal handler: nonce in memory + one SQLite SELECT"

// startSQLiteSelectFloor starts the sqlite-select baseline and returns its
// requests (one unique nonce each, enough for a phase at bareRPS).
func startSQLiteSelectFloor(ctx context.Context, o options, self, tmp string, bareRPS float64) (*proc, source, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, source{}, err
	}
	p, err := startProc(ctx, "baseline sqlite-select", self, []string{"baseline", "-mode", "sqlite-select", "-addr", addr, "-sqlite", tmp + "/baseline-select.db", "-sqlite-sync", o.sqliteSync}, nil, addr, tmp)
	if err != nil {
		return nil, source{}, err
	}
	list := make([]string, int(bareRPS*(o.phase+o.warmup).Seconds())+1000)
	for i := range list {
		list[i] = p.base + "/q?order_no=" + orderNo + "&nonce=" + randomHex(16)
	}
	return p, urls(list), nil
}

// repeatURL is a source that sends the same GET forever.
func repeatURL(u string) source {
	return source{want: http.StatusOK, next: func() (*http.Request, bool) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		return req, true
	}}
}

// gatehouse is a running gatehouse process with a seeded partner app.
type gatehouse struct {
	proc           *proc
	admin          string
	apiKey         string
	appKey, secret string
	// env is what the process was started with but its addresses: a
	// replica started with it shares the database, the key-value store
	// and the keys.
	env []string
	// sqliteSync is its GATEHOUSE_SQLITE_SYNC.
	sqliteSync string
}

func startGatehouse(ctx context.Context, o options, name, tmp string, env []string) (*gatehouse, error) {
	pub, err := freeAddr()
	if err != nil {
		return nil, err
	}
	adm, err := freeAddr()
	if err != nil {
		return nil, err
	}
	apiKey := "bench-" + randomHex(16)
	env = append(env,
		"GATEHOUSE_MASTER_KEY="+base64.StdEncoding.EncodeToString(randomBytes(32)),
		"GATEHOUSE_JWT_SECRET="+base64.StdEncoding.EncodeToString(randomBytes(32)),
		"GATEHOUSE_BOOTSTRAP_API_KEY="+apiKey,
		"GATEHOUSE_LOG_FORMAT=json",
		// The webhook phases call back the harness's sink on loopback.
		"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true",
		// The embedded database pays for the same durability as the
		// SQLite floors it is measured against.
		"GATEHOUSE_SQLITE_SYNC="+o.sqliteSync,
	)
	bin := o.gatehouse
	if o.binary != "" {
		bin = o.binary
	}
	args := []string{"serve"}
	if o.pinCPU != "" {
		// One core for the server, as the overload figures are defined.
		args = append([]string{"-c", o.pinCPU, bin}, args...)
		bin = "taskset"
		env = append(env, "GOMAXPROCS=1")
	}
	p, err := startProc(ctx, name, bin, args, append(env, "GATEHOUSE_ADDR="+pub, "GATEHOUSE_ADMIN_ADDR="+adm), pub, tmp)
	if err != nil {
		return nil, err
	}
	g := &gatehouse{proc: p, admin: "http://" + adm, apiKey: apiKey, env: env, sqliteSync: o.sqliteSync}
	if err := g.seed(ctx); err != nil {
		_ = p.stop()
		return nil, err
	}
	return g, nil
}

// replica starts another gatehouse process on g's database, key-value
// store and keys (no seeding: it serves g's app and order).
func (g *gatehouse) replica(ctx context.Context, o options, name, tmp string, extraEnv ...string) (*gatehouse, error) {
	pub, err := freeAddr()
	if err != nil {
		return nil, err
	}
	adm, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// A data dir of its own (the last of a repeated variable wins).
	env := append(slices.Clip(g.env), "GATEHOUSE_ADDR="+pub, "GATEHOUSE_ADMIN_ADDR="+adm, "GATEHOUSE_DATA_DIR="+tmp+"/data-"+strings.ReplaceAll(name, " ", "-"))
	env = append(env, extraEnv...)
	p, err := startProc(ctx, name, o.gatehouse, []string{"serve"}, env, pub, tmp)
	if err != nil {
		return nil, err
	}
	r := *g
	r.proc, r.admin = p, "http://"+adm
	return &r, nil
}

// scaleOut measures signed v1 order queries spread evenly over replicas
// (the same app, one nonce each, every replica on the same Postgres and
// Redis).
func scaleOut(ctx context.Context, o options, c *http.Client, bareRPS float64, replicas ...*gatehouse) (loadResult, error) {
	n := int(bareRPS*(o.phase+o.warmup).Seconds()) + 1000
	s := partnerclient.Signer{AppKey: replicas[0].appKey, AppSecret: replicas[0].secret}
	list := make([]string, n)
	for i := range list {
		u, err := s.SignURL(replicas[i%len(replicas)].proc.base + "/api/v1/orders/query?order_no=" + orderNo)
		if err != nil {
			return loadResult{}, err
		}
		list[i] = u
	}
	return measure(ctx, o, c, urls(list)), nil
}

// seed creates a partner app without a practical rate limit and its order,
// through the admin GraphQL API.
func (g *gatehouse) seed(ctx context.Context) error {
	var app struct {
		CreatePartnerApp struct {
			App       struct{ ID, AppKey string }
			AppSecret string
		}
	}
	if err := g.graphql(ctx, `mutation { createPartnerApp(input: {appName: "bench", rateLimit: 1000000}) { app { id appKey } appSecret } }`, &app); err != nil {
		return err
	}
	g.appKey, g.secret = app.CreatePartnerApp.App.AppKey, app.CreatePartnerApp.AppSecret
	return g.graphql(ctx, `mutation { createOrder(input: {appID: "`+app.CreatePartnerApp.App.ID+`", orderNo: "`+orderNo+`", amount: "99.90"}) { orderNo } }`, nil)
}

func (g *gatehouse) graphql(ctx context.Context, query string, into any) error {
	body, _ := json.Marshal(map[string]string{"query": query})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.admin+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", g.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("graphql: HTTP %d: %w", resp.StatusCode, err)
	}
	if len(out.Errors) > 0 || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("graphql: HTTP %d: %v", resp.StatusCode, out.Errors)
	}
	if into == nil {
		return nil
	}
	return json.Unmarshal(out.Data, into)
}

// presign signs n order queries, each with its own nonce, before any is sent.
func (g *gatehouse) presign(n int) ([]string, error) {
	s := partnerclient.Signer{AppKey: g.appKey, AppSecret: g.secret}
	out := make([]string, n)
	for i := range out {
		u, err := s.SignURL(g.proc.base + "/api/v1/orders/query?order_no=" + orderNo)
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// externalPhases measures gatehouse on Postgres + Redis against the
// minimal one-Redis-one-Postgres handler, on a database of its own.
func externalPhases(ctx context.Context, o options, rep *report, self, tmp string, client *http.Client, bare loadResult) error {
	if o.postgresURL == "" || o.redisURL == "" {
		return fmt.Errorf("disabled (-postgres or -redis empty)")
	}
	admin, err := sql.Open("pgx", o.postgresURL)
	if err != nil {
		return err
	}
	defer admin.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := admin.PingContext(pctx); err != nil {
		return fmt.Errorf("postgres unreachable: %w", err)
	}
	ropt, err := redis.ParseURL(o.redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	if err := rdb.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("redis unreachable: %w", err)
	}
	id := randomHex(4)
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
	u, err := url.Parse(o.postgresURL)
	if err != nil {
		return err
	}
	u.Path = "/" + dbName
	dbURL := u.String()

	g, err := startGatehouse(ctx, o, "gatehouse postgres", tmp, []string{
		"GATEHOUSE_DATA_DIR=" + tmp + "/data-pg", "GATEHOUSE_DATABASE_URL=" + dbURL,
		"GATEHOUSE_REDIS_URL=" + o.redisURL, "GATEHOUSE_REDIS_PREFIX=" + prefix,
	})
	if err != nil {
		return err
	}
	defer g.proc.stop()
	// What one request costs Redis and Postgres (costs.go), measured after
	// the ratio phases of the signed query and of the deductions.
	benchDB, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	defer benchDB.Close()
	costs := newCostSampler(ctx, rdb, benchDB, dbName, g.proc.cmd.Process.Pid, o.redisURL, dbURL)
	signedCosts := func() error {
		// Enough for both cost phases (costPhases).
		list, err := g.presign(2*int(bare.RPS*costPhaseTime(o).Seconds()) + 1000)
		if err != nil {
			return err
		}
		costPhases(ctx, o, client, rep, costs, "signed v1 order query, Postgres + Redis", urls(list))
		return nil
	}
	if o.fanoutOnly {
		return fanoutPhase(ctx, rep, g, dbURL, "Postgres", self, tmp, []string{"-mode", "outbox-pg", "-postgres", dbURL})
	}
	if o.webhooksOnly {
		return webhookPhases(ctx, rep, g, dbURL, "Postgres", self, tmp, 200, []string{"-mode", "outbox-pg", "-postgres", dbURL})
	}
	if o.publishOnly {
		return publishPhases(ctx, o, rep, g, client, self, tmp, dbURL)
	}
	if o.deductOnly {
		return deductPhases(ctx, o, rep, g, client, bare, self, tmp, "Postgres", []string{"-mode", "update-pg", "-postgres", dbURL}, costs)
	}

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	base, err := startProc(ctx, "baseline redis-pg", self, []string{"baseline", "-mode", "redis-pg", "-addr", addr,
		"-postgres", dbURL, "-redis", o.redisURL, "-prefix", prefix + "baseline:"}, nil, addr, tmp)
	if err != nil {
		return err
	}
	n := int(bare.RPS*(o.phase+o.warmup).Seconds()) + 1000
	list := make([]string, n)
	for i := range list {
		list[i] = base.base + "/q?order_no=" + orderNo + "&nonce=" + randomHex(16)
	}
	// The second replica starts (and idles) before the one-replica figure,
	// so that the pair is measured right after it.
	g2, err := g.replica(ctx, o, "gatehouse postgres replica 2", tmp)
	if err != nil {
		_ = base.stop()
		return err
	}
	signedList, err := g.presign(n)
	if err != nil {
		_ = base.stop()
		_ = g2.proc.stop()
		return err
	}
	// The floor and gatehouse in turns (measurePair).
	baseLoad, signed := measurePair(ctx, o, client, urls(list), urls(signedList))
	rep.Baselines["minimal handler: one Redis SET NX + one Postgres SELECT"] = baseLoad
	rep.add("signed v1 order query, Postgres + Redis", signed, "minimal handler: one Redis SET NX + one Postgres SELECT", baseLoad)
	// The same with tracing on, against the same floor measured anew.
	const pgTraced = "signed v1 order query, Postgres + Redis" + tracedSuffix
	if err := tracedPhase(ctx, o, client, pgTraced, func(env []string) (*gatehouse, error) {
		return g.replica(ctx, o, "gatehouse postgres traced", tmp, env...)
	}, func() source {
		fresh := make([]string, n)
		for i := range fresh {
			fresh[i] = base.base + "/q?order_no=" + orderNo + "&nonce=" + randomHex(16)
		}
		return urls(fresh)
	}, n, "minimal handler: one Redis SET NX + one Postgres SELECT", rep); err != nil {
		rep.skip(pgTraced, err.Error())
	}
	if err := base.stop(); err != nil {
		_ = g2.proc.stop()
		return err
	}
	if o.signedOnly {
		if rss, err := g.proc.peakRSS(); err == nil {
			rep.scalar("peak RSS, gatehouse on Postgres + Redis after its signed phase", float64(rss)/(1<<20), "MiB", "", 0)
		}
		if err := g2.proc.stop(); err != nil {
			return err
		}
		return signedCosts()
	}
	pair, err := scaleOut(ctx, o, client, bare.RPS, g, g2)
	if err := errors.Join(err, g2.proc.stop()); err != nil {
		return err
	}
	rep.add("signed v1 order query, 2 replicas, Postgres + Redis", pair, "one replica (the line above)", signed)
	if err := signedCosts(); err != nil {
		return err
	}
	if err := ticketPhases(ctx, o, rep, g, client, self, tmp, "Postgres", []string{"-mode", "insert-pg", "-postgres", dbURL},
		"minimal handler: one Redis SET NX + one Postgres SELECT", baseLoad); err != nil {
		return err
	}
	if err := deductPhases(ctx, o, rep, g, client, bare, self, tmp, "Postgres", []string{"-mode", "update-pg", "-postgres", dbURL}, costs); err != nil {
		return err
	}
	if err := webhookPhases(ctx, rep, g, dbURL, "Postgres", self, tmp, 200, []string{"-mode", "outbox-pg", "-postgres", dbURL}); err != nil {
		return err
	}
	if err := publishPhases(ctx, o, rep, g, client, self, tmp, dbURL); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	rss, err := g.proc.peakRSS()
	if err == nil {
		rep.scalar("peak RSS, gatehouse on Postgres + Redis after its load phases", float64(rss)/(1<<20), "MiB", "", 0)
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

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randomHex(n int) string { return hex.EncodeToString(randomBytes(n)) }

// deductPhases measures signed stock deductions (quantity 1, a new biz_no
// each) on one hot SKU and spread over benchSKUs SKUs, against a baseline
// process doing the plain conditional single-row UPDATE per request
// (baselineArgs) on its own table in the same kind of database. With
// costs, a last phase measures what a deduction spread over the SKUs
// costs the backends.
func deductPhases(ctx context.Context, o options, rep *report, g *gatehouse, c *http.Client, bare loadResult, self, tmp, label string, baselineArgs []string, costs *costSampler) (err error) {
	var skus []string
	for i := range benchSKUs {
		var out struct{ CreateSku struct{ ID string } }
		if err := g.graphql(ctx, fmt.Sprintf(`mutation { createSku(input: {name: "bench sku %d", stock: 1000000000}) { id } }`, i+1), &out); err != nil {
			return err
		}
		skus = append(skus, out.CreateSku.ID)
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	base, err := startProc(ctx, "baseline update "+label, self, append([]string{"baseline", "-addr", addr}, baselineArgs...), nil, addr, tmp)
	if err != nil {
		return err
	}
	// The floor runs through both phases: each is measured in turns with
	// gatehouse (measurePair). A floor that does not stop cleanly is
	// reported, as before.
	defer func() { err = errors.Join(err, base.stop()) }()
	baseName := "plain conditional UPDATE per request, " + label

	n := int(bare.RPS*(o.phase+o.warmup).Seconds()/2) + 1000
	s := partnerclient.Signer{AppKey: g.appKey, AppSecret: g.secret}
	for _, ph := range []struct {
		name   string
		spread int
		suffix string
	}{{"one hot SKU", 1, ", one row"}, {"100 SKUs", benchSKUs, ", 100 rows"}} {
		list := make([]string, n)
		run := randomHex(4)
		for i := range list {
			u, err := s.SignURL(fmt.Sprintf("%s/api/v1/inventory/deduct?biz_no=B-%s-%d&sku_id=%s&quantity=1", g.proc.base, run, i, skus[i%ph.spread]))
			if err != nil {
				return err
			}
			list[i] = u
		}
		phaseSkus := skus[:ph.spread]
		before, err := g.skuStocks(ctx, phaseSkus)
		if err != nil {
			return err
		}
		// The warm-up's requests are counted too, for the stock check.
		floor, l, warm := measurePairWarm(ctx, o, c, cycle(base.base+"/d?sku_id=%d", ph.spread), urlsWith(http.MethodPost, list))
		rep.Baselines[baseName+ph.suffix] = floor
		name := "signed deduction, " + ph.name + ", " + label
		rep.add(name, l, baseName+ph.suffix, floor)
		msg, err := g.checkDeductions(ctx, c, phaseSkus, before, warm.Requests+l.Requests, warm.Errors+l.Errors, run, 50)
		if err != nil {
			return fmt.Errorf("%s: correctness check failed: %w", name, err)
		}
		rep.check(name, msg)
	}
	if costs != nil {
		list := make([]string, int(bare.RPS*costPhaseTime(o).Seconds())+1000) // both cost phases
		run := randomHex(4)
		for i := range list {
			u, err := s.SignURL(fmt.Sprintf("%s/api/v1/inventory/deduct?biz_no=C-%s-%d&sku_id=%s&quantity=1", g.proc.base, run, i, skus[i%benchSKUs]))
			if err != nil {
				return err
			}
			list[i] = u
		}
		costPhases(ctx, o, c, rep, costs, "signed deduction, 100 SKUs, "+label, urlsWith(http.MethodPost, list))
	}
	return nil
}

// tracedSuffix ends the name of a signed-query line with tracing on.
const tracedSuffix = ", tracing on (all sampled, OTLP/HTTP to a discarding sink)"

// tracedPhase measures the signed query on a gatehouse process started
// by start with tracing on (every request sampled, its spans exported to
// a discarding OTLP/HTTP sink: the extra environment start gets), in
// turns with a fresh run of the floor, and stops that process.
func tracedPhase(ctx context.Context, o options, client *http.Client, name string, start func(env []string) (*gatehouse, error), floor func() source, n int, floorName string, rep *report) error {
	sink, err := startOTLPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	tr, err := start(sink.tracingEnv())
	if err != nil {
		return err
	}
	list, err := tr.presign(n)
	if err != nil {
		_ = tr.proc.stop()
		return err
	}
	floorLoad, traced, warm := measurePairWarm(ctx, o, client, floor(), urls(list))
	if err := tr.proc.stop(); err != nil { // flushes its last spans
		return err
	}
	rep.add(name, traced, floorName, floorLoad)
	if sink.exports.Load() == 0 {
		return fmt.Errorf("the traced gatehouse exported nothing to the sink")
	}
	fmt.Printf("%-58s %d exports, %.1f MiB (%.0f bytes per request)\n", "  its discarding OTLP sink received", sink.exports.Load(),
		float64(sink.bytes.Load())/(1<<20), float64(sink.bytes.Load())/float64(max(1, traced.Requests+warm.Requests)))
	return nil
}
