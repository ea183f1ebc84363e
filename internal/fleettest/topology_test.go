package fleettest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
	"gatehouse/internal/webhook"
)

// pgbouncerWarn is what start-up WARNs through a pooler without a direct URL.
const pgbouncerWarn = "GATEHOUSE_DATABASE_DIRECT_URL is not set"

// TestTopologies runs the same happy paths (happyPaths: tickets, the
// partner API, sign-in, the deduction, a paid order's webhook and a
// refund) on every
// deployment gatehouse supports beyond one box:
//
//   - a 3-master Redis Cluster and a Sentinel group, through their URLs
//     (on the cluster, the app's keys share one slot and every other key
//     is single: no CROSSSLOT or MOVED error reaches a caller; /readyz
//     writes a probe key on every master);
//   - Postgres through Debian's PgBouncer 1.18 in transaction mode, with
//     GATEHOUSE_DATABASE_DIRECT_URL and without it (start-up WARNs, and a
//     delivery queued by another replica is found by the 500 ms poll).
func TestTopologies(t *testing.T) {
	t.Parallel()
	// One PgBouncer for both pooled runs (each has a database of its own).
	bouncer := fleet.StartPgBouncer(t, "transaction")
	for _, topo := range []struct {
		name string
		// start returns the backend to run on and the direct URL ("" when
		// there is none to give).
		start func(t *testing.T) (b testenv.Backend, direct string)
	}{
		{"redis cluster", func(t *testing.T) (testenv.Backend, string) {
			return privateRedis(t, fleet.StartCluster(t, 3).URL()), ""
		}},
		{"redis sentinel", func(t *testing.T) (testenv.Backend, string) {
			return privateRedis(t, fleet.StartSentinelGroup(t).URL()), ""
		}},
		{"pgbouncer transaction mode with direct URL", func(t *testing.T) (testenv.Backend, string) {
			direct := testenv.PostgresURL(t)
			return pooled(t, bouncer, direct), direct
		}},
		{"pgbouncer transaction mode without direct URL", func(t *testing.T) (testenv.Backend, string) {
			return pooled(t, bouncer, testenv.PostgresURL(t)), ""
		}},
	} {
		t.Run(topo.name, func(t *testing.T) {
			t.Parallel()
			b, direct := topo.start(t)
			f := setupHappy(t, b, func(c *config.Config) { c.Database.DirectURL = direct })
			throughPooler := strings.HasPrefix(topo.name, "pgbouncer")
			if throughPooler {
				warned := slices.ContainsFunc(strings.Split(f.Logs.String(), "\n"), func(l string) bool {
					return strings.Contains(l, "level=WARN") && strings.Contains(l, pgbouncerWarn)
				})
				if warned != (direct == "") {
					t.Fatalf("direct URL %q: start-up WARN %q logged: %v\n%s", direct, pgbouncerWarn, warned, f.Logs.String())
				}
				if !f.App.DB.ThroughPooler() || f.App.DB.CanListen() != (direct != "") {
					t.Fatalf("ThroughPooler %v, CanListen %v with direct URL %q", f.App.DB.ThroughPooler(), f.App.DB.CanListen(), direct)
				}
			}
			happyPaths(t, f)
			if throughPooler {
				crossReplicaWakeUp(t, f, b, direct)
				if log := bouncer.Log(); strings.Contains(log, "got packet 'A'") {
					t.Fatalf("something LISTENed through the pooler:\n%s", log)
				}
			}
		})
	}
}

// privateRedis is Postgres (a fresh database) and the Redis deployment at
// redisURL, which the test started for itself.
func privateRedis(t *testing.T, redisURL string) testenv.Backend {
	return testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(t), RedisURL: redisURL, KeyPrefix: "fleet:"}
}

// pooled is the database direct reached through bouncer, and the shared
// Redis under a prefix of the test's own.
func pooled(t *testing.T, bouncer *fleet.PgBouncer, direct string) testenv.Backend {
	return testenv.Backend{Name: "postgres", DatabaseURL: bouncer.URL(t, direct), RedisURL: testenv.RedisURL(t), KeyPrefix: testenv.KeyPrefix(t)}
}

// receiver is a webhook receiver on loopback that answers 200 and keeps
// the bodies it got.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(body))
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// gotOrder reports whether a delivery about order orderNo arrived (bizData
// is a JSON string inside the body).
func (r *receiver) gotOrder(orderNo string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		if strings.Contains(b, `\"order_no\":\"`+orderNo+`\"`) {
			return true
		}
	}
	return false
}

// setupHappy is gatehouse on backend b with a payment provider and the
// app's webhook receiver, both on loopback.
func setupHappy(t *testing.T, b testenv.Backend, opts ...apptest.Option) *fixture {
	t.Helper()
	provider := paymenttest.New(t)
	hooks := newReceiver(t)
	f := setupOn(t, b, hooks.URL, append([]apptest.Option{func(c *config.Config) {
		c.Webhooks.AllowPrivate = true
		c.Payments.URL, c.Payments.APIKey, c.Payments.Secret = provider.URL, provider.APIKey, provider.Secret
	}}, opts...)...)
	f.provider, f.hooks = provider, hooks
	return f
}

// happyPaths runs the happy paths of the ticket, partner, sign-in,
// deduction and refund suites on f, whatever Redis and Postgres deployment
// it stands on. Every topology runs this one function.
func happyPaths(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	if st, m := f.readyz(t); st != 200 || m["kv"] != "ok" || m["database"] != "ok" || m["replay_memory_start"] == "" {
		t.Fatalf("readyz: %d %v", st, m)
	}

	// Tickets: created and listed.
	for range 3 {
		if r := f.Do(t, "POST", f.PublicURL+"/api/tickets", `{"title":"on the fleet"}`, apptest.JSONBody...); r.Status != http.StatusCreated {
			t.Fatalf("create ticket: %d %s", r.Status, r.Body)
		}
	}
	if r := f.Do(t, "GET", f.PublicURL+"/api/tickets", ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "on the fleet") {
		t.Fatalf("list tickets: %d %s", r.Status, r.Body)
	}

	// Partner: an order, queried by concurrent signed requests, all
	// answered; a replay refused.
	if _, err := f.App.Orders.Create(ctx, order.CreateInput{AppID: f.app.ID, OrderNo: "SO-1", Amount: "9.90"}); err != nil {
		t.Fatal(err)
	}
	queryOrder := func() (string, result) {
		u := f.signedURL(t, "GET", "/api/v1/orders/query", url.Values{"order_no": {"SO-1"}})
		return u, f.call("GET", u)
	}
	var wg sync.WaitGroup
	results := make([]result, 20)
	for i := range results {
		wg.Go(func() { _, results[i] = queryOrder() })
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil || r.status != 200 || r.code != 200 {
			t.Fatalf("signed order query %d: %s", i, r)
		}
	}
	u, r := queryOrder()
	if r.status != 200 || r.code != 200 {
		t.Fatalf("signed order query: %s", r)
	}
	if r := f.call("GET", u); r.status != 401 || r.code != 4004 {
		t.Fatalf("replayed signed query: %s, want 401/4004", r)
	}
	if _, r := f.query(t); !admitted(r) {
		t.Fatalf("signed query of an unknown order: %s, want 404/5001", r)
	}

	// Deduction, and its idempotent repeat.
	deduct := func(bizNo string) result {
		return f.call("POST", f.signedURL(t, "POST", "/api/v1/inventory/deduct", url.Values{
			"biz_no": {bizNo}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"2"},
		}))
	}
	if r := deduct("B-1"); r.status != 200 || r.code != 200 {
		t.Fatalf("deduct: %s", r)
	}
	if r := deduct("B-1"); r.status != 200 || r.code != 200 {
		t.Fatalf("deduct repeat: %s", r)
	}
	if sku, err := f.App.Inventory.Sku(ctx, f.skuID); err != nil || sku.Stock != 998 {
		t.Fatalf("stock after one deduction of 2: %+v %v", sku, err)
	}

	// Sign-in: a failed attempt (throttle counters), a login, the token
	// works; logout puts it on the deny-list.
	if r := f.Do(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"`+userName+`","password":"wrong password"}`, "Content-Type", "application/json"); r.Status != 401 {
		t.Fatalf("wrong password: %d %s", r.Status, r.Body)
	}
	tok := f.login(t)
	if st := f.me(t, tok); st != 200 {
		t.Fatalf("me: %d", st)
	}
	if r := f.Do(t, "POST", f.PublicURL+"/auth/logout", "", "Authorization", "Bearer "+tok); r.Status/100 != 2 {
		t.Fatalf("logout: %d %s", r.Status, r.Body)
	}
	if st := f.me(t, tok); st != 401 {
		t.Fatalf("me after logout: %d", st)
	}

	// The order is paid: its webhook reaches the app's receiver.
	if _, err := f.App.Orders.Pay(ctx, "SO-1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return f.hooks.gotOrder("SO-1") })

	// Refund of the paid order: one provider call under its lock; a repeat
	// returns it refunded without calling again.
	for range 2 {
		o, err := f.App.Payments.Refund(ctx, "SO-1", "fleet")
		if err != nil || string(o.Status) != "REFUNDED" {
			t.Fatalf("refund: %+v %v", o, err)
		}
	}
	if calls := f.provider.Calls(); len(calls) != 1 || calls[0].Problem != "" {
		t.Fatalf("provider calls %+v, want one correct call", calls)
	}
}

// crossReplicaWakeUp: a second replica B on the same pooled database;
// f's dispatcher is stopped, so a delivery f queues can only be attempted
// by B: woken by NOTIFY on its direct connection, or found by its 500 ms
// poll without one.
func crossReplicaWakeUp(t *testing.T, f *fixture, b testenv.Backend, direct string) {
	t.Helper()
	ctx := context.Background()
	bEnv := startReplica(t, f, b, func(c *config.Config) { c.Database.DirectURL = direct })
	want := webhook.DefaultPollInterval
	if direct == "" {
		want = webhook.PollWithoutListen
	}
	if got := bEnv.App.Webhooks.PollInterval(); got != want {
		t.Fatalf("replica B polls every %v, want %v", got, want)
	}
	if err := f.App.Webhooks.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.App.Orders.Create(ctx, order.CreateInput{AppID: f.app.ID, OrderNo: "SO-2", Amount: "1.00"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := f.App.Orders.Pay(ctx, "SO-2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return f.hooks.gotOrder("SO-2") })
	t.Logf("a delivery queued on replica A reached the receiver through replica B in %v", time.Since(t0))
}
