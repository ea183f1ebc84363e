package e2e_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/internal/apikey"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
)

// TestClientGoneIsNotAnOutage: a client that hangs up while the request
// waits on a slow dependency (the database held by another transaction;
// on the Redis backend also a frozen Redis) is logged as that: the
// request's line at INFO with status 499, counted in the client_closed
// class, no ERROR line and no "dependency unavailable" — on the partner
// API (a signed query and a deduction), GraphQL, the ticket REST routes
// and sign-in (logout). A dependency that is truly down still answers 503
// and logs its ERROR (TestPostgresFrozen and the resilience tests).
func TestClientGoneIsNotAnOutage(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var rds *fleet.Redis
		if !b.Embedded() {
			rds = fleet.StartRedis(t) // a private Redis, to freeze
			b.RedisURL = rds.URL()
		}
		f := setup(t, b)
		ctx := context.Background()
		_, adminKey, err := f.App.APIKeys.Create(ctx, "client-gone", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		login := send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/api/auth/login",
			`{"username":"`+userName+`","password":"`+userPassword+`"}`, "Content-Type", "application/json"))
		if login.status != 200 {
			t.Fatalf("login: %d %s", login.status, login.body)
		}
		token, _ := login.object(t)["access_token"].(string)
		// Warm up: the app's credentials cached, pooled connections open.
		if r := send(t, f.Client, newRequest(t, "GET", f.signed(t, f.app.AppKey, f.secret, "/api/v1/orders/query", url.Values{"order_no": {"SO1001"}}), "")); r.status != 200 {
			t.Fatalf("warm-up: %d %s", r.status, r.body)
		}

		type gone struct {
			name, method, path string
			req                func(id string) *http.Request
			slow               func(t *testing.T) (release func())
		}
		slowDB := func(t *testing.T) func() { return holdDatabase(t, f, b) }
		// GraphQL checks the API key before it reads the body, and net/http
		// notices a client gone only once the body is read: the orders
		// alone are held, so that payOrder waits, not the key check.
		slowOrders := func(t *testing.T) func() { return holdDatabase(t, f, b, "orders") }
		cases := []gone{
			{"partner deduction, database slow", "POST", "/api/v1/inventory/deduct", func(id string) *http.Request {
				return newRequest(t, "POST", f.signed(t, f.app.AppKey, f.secret, "/api/v1/inventory/deduct",
					url.Values{"biz_no": {"gone-" + id}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}}), "", "X-Request-Id", id)
			}, slowDB},
			{"GraphQL mutation, database slow", "POST", "/graphql", func(id string) *http.Request {
				return newRequest(t, "POST", f.AdminURL+"/graphql", `{"query":"mutation { payOrder(orderNo: \"SO1002\") { status } }"}`,
					"Content-Type", "application/json", "X-API-Key", adminKey, "X-Request-Id", id)
			}, slowOrders},
			{"ticket create, database slow", "POST", "/api/tickets", func(id string) *http.Request {
				return newRequest(t, "POST", f.PublicURL+"/api/tickets", `{"title":"gone"}`, "Content-Type", "application/json", "X-Request-Id", id)
			}, slowDB},
			{"logout, database slow", "POST", "/api/auth/logout", func(id string) *http.Request {
				return newRequest(t, "POST", f.PublicURL+"/api/auth/logout", "", "Authorization", "Bearer "+token, "X-Request-Id", id)
			}, slowDB},
		}
		if rds != nil {
			cases = append(cases, gone{"partner query, Redis frozen", "GET", "/api/v1/orders/query", func(id string) *http.Request {
				return newRequest(t, "GET", f.signed(t, f.app.AppKey, f.secret, "/api/v1/orders/query", url.Values{"order_no": {"SO1001"}}), "", "X-Request-Id", id)
			}, func(t *testing.T) func() { rds.Freeze(); return rds.Thaw }})
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				id := "gone-" + b.Name + "-" + strconv.Itoa(i) + "-" + testenv.RandomSuffix()
				listener := "public"
				if c.path == "/graphql" {
					listener = "admin"
				}
				closed0, fivexx0 := responses(t, listener, "client_closed"), responses(t, listener, "5xx")
				var once sync.Once
				held := c.slow(t)
				release := func() { once.Do(held) }
				t.Cleanup(release)
				// The client gives up after 300 ms (the request deadline is
				// 10 s, Redis calls' own budget 1 s): the server is still
				// waiting on the dependency.
				cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				res, err := f.Client.Do(c.req(id).WithContext(cctx))
				cancel()
				if err == nil {
					res.Body.Close()
					release()
					t.Fatalf("the request was answered (%d) while the dependency was held", res.StatusCode)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("client error %v, want its own timeout", err)
				}
				// The front door saw the client go (and logged why at debug
				// level); the dependency is released, then the line is written.
				waitLog(t, f, "request abandoned by the client", id)
				release()
				line := waitLog(t, f, "msg=request ", id)
				for _, want := range []string{"level=INFO", "msg=request", "status=499", "path=" + c.path, "method=" + c.method} {
					if !strings.Contains(line, want) {
						t.Errorf("request line lacks %s: %s", want, line)
					}
				}
				for l := range strings.Lines(f.Logs.String()) {
					if !strings.Contains(l, id) {
						continue
					}
					if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
						t.Errorf("a client that went away logged as a failure: %s", l)
					}
					if msg, _, _ := strings.Cut(l[strings.Index(l, "msg="):], " err="); strings.Contains(msg, "dependency unavailable") {
						t.Errorf("a client that went away logged as a dependency failure: %s", l)
					}
				}
				if d := responses(t, listener, "client_closed") - closed0; d != 1 {
					t.Errorf("gatehouse_http_responses_total{listener=%q,class=\"client_closed\"} grew by %v, want 1", listener, d)
				}
				if d := responses(t, listener, "5xx") - fivexx0; d != 0 {
					t.Errorf("5xx responses grew by %v", d)
				}
			})
		}
		// Nothing was held for good: the same routes answer again.
		if r := send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/api/tickets", `{"title":"after"}`, "Content-Type", "application/json")); r.status != 201 {
			t.Fatalf("after: %d %s", r.status, r.body)
		}
	})
}

// TestSlowDependencyAbandonWarns: when a dependency hangs and clients give
// up before the request deadline, every request ends as a 499; those that
// had waited more than half of GATEHOUSE_REQUEST_TIMEOUT are logged at
// WARN with a line naming what they waited on, so the outage shows: the
// database held, a ticket create whose client gives up after 0.7 s of the
// 1 s timeout. (A frozen Redis needs no such case: its calls have a budget
// of their own, well under half the timeout, and answer 503 first.)
func TestSlowDependencyAbandonWarns(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b, func(c *config.Config) { c.Server.RequestTimeout = time.Second })
		if r := send(t, f.Client, newRequest(t, "GET", f.signed(t, f.app.AppKey, f.secret, "/api/v1/orders/query", url.Values{"order_no": {"SO1001"}}), "")); r.status != 200 {
			t.Fatalf("warm-up: %d %s", r.status, r.body)
		}
		type slow struct {
			name, path, waitedOn string
			req                  func(id string) *http.Request
			hold                 func(t *testing.T) (release func())
		}
		cases := []slow{{"ticket create, database held", "/api/tickets", "database", func(id string) *http.Request {
			return newRequest(t, "POST", f.PublicURL+"/api/tickets", `{"title":"slow"}`, "Content-Type", "application/json", "X-Request-Id", id)
		}, func(t *testing.T) func() { return holdDatabase(t, f, b) }}}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				id := "slow-" + b.Name + "-" + strconv.Itoa(i) + "-" + testenv.RandomSuffix()
				closed0, fivexx0 := responses(t, "public", "client_closed"), responses(t, "public", "5xx")
				var once sync.Once
				held := c.hold(t)
				release := func() { once.Do(held) }
				t.Cleanup(release)
				cctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
				res, err := f.Client.Do(c.req(id).WithContext(cctx))
				cancel()
				if err == nil {
					res.Body.Close()
					t.Fatalf("the request was answered (%d) while the dependency was held", res.StatusCode)
				}
				warn := waitLog(t, f, "msg=\"client gave up waiting", id)
				release()
				for _, want := range []string{"level=WARN", "waited_on=" + c.waitedOn, "request_timeout=1s"} {
					if !strings.Contains(warn, want) {
						t.Errorf("WARN line lacks %s: %s", want, warn)
					}
				}
				line := waitLog(t, f, "msg=request ", id)
				for _, want := range []string{"level=WARN", "status=499", "path=" + c.path} {
					if !strings.Contains(line, want) {
						t.Errorf("request line lacks %s: %s", want, line)
					}
				}
				if strings.Contains(f.Logs.String(), "level=ERROR") && strings.Contains(f.Logs.String(), id) {
					for l := range strings.Lines(f.Logs.String()) {
						if strings.Contains(l, id) && strings.Contains(l, "level=ERROR") {
							t.Errorf("an abandoned request logged an ERROR: %s", l)
						}
					}
				}
				if d := responses(t, "public", "client_closed") - closed0; d != 1 {
					t.Errorf("client_closed grew by %v, want 1", d)
				}
				if d := responses(t, "public", "5xx") - fivexx0; d != 0 {
					t.Errorf("5xx grew by %v", d)
				}
			})
		}
	})
}

// holdDatabase makes the backend's database keep the next writes waiting
// until release: on Postgres a transaction of its own holds the tables
// named (none: every table of the test's database) locked, reads wait
// too; embedded, a transaction of the app's holds SQLite's single write
// turn.
func holdDatabase(t *testing.T, f *fixture, b testenv.Backend, tables ...string) (release func()) {
	t.Helper()
	ctx := context.Background()
	if b.Embedded() {
		tx, err := f.App.DB.Client.Tx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback() }
	}
	db, err := sql.Open("pgx", b.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	list := strings.Join(tables, ", ")
	if list == "" {
		if err := tx.QueryRowContext(ctx, `SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables WHERE schemaname = 'public'`).Scan(&list); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.ExecContext(ctx, "LOCK TABLE "+list+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(); _ = db.Close() }
}

// waitLog returns the first log line of request id holding what (within 10 s).
func waitLog(t *testing.T, f *fixture, what, id string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for l := range strings.Lines(f.Logs.String()) {
			if strings.Contains(l, what) && strings.Contains(l, "request_id="+id) {
				return strings.TrimSpace(l)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line %q for %s:\n%s", what, id, f.Logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// responses is gatehouse_http_responses_total of listener and class.
func responses(t *testing.T, listener, class string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gatehouse_http_responses_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["listener"] == listener && got["class"] == class {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("gatehouse_http_responses_total{listener=%q,class=%q} is not exported", listener, class)
	return 0
}
