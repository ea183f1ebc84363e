package e2e_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/ent/idempotencyrecord"
	"gatehouse/ent/ticket"
	"gatehouse/internal/apikey"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// freeze stops the private cluster's postmaster and every backend with
// SIGSTOP: the database accepts TCP connections (the kernel does) but
// answers nothing, the failure the request deadline exists for. The
// returned thaw (also run at cleanup, whatever happens) sends SIGCONT.
func (p *privatePostgres) freeze(t *testing.T) (thaw func()) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	postmaster, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{postmaster}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after ")".
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(postmaster) {
			pids = append(pids, pid)
		}
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		})
	}
	t.Cleanup(thaw)
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %d: %v", pid, err)
		}
	}
	return thaw
}

// TestPostgresFrozen freezes the database under a running gatehouse
// (GATEHOUSE_REQUEST_TIMEOUT=1s): from the first request on, every front
// door answers 503 in its own shape within the deadline — tickets and
// sign-in {"error":"unavailable"}, partner routes 503/6000, GraphQL
// UNAVAILABLE — never 500, never hanging. Clients that gave up early and
// clients that got the 503 alike find nothing committed once the
// database resumes, and the deduction they attempted runs anew.
func TestPostgresFrozen(t *testing.T) {
	pg := startPrivatePostgres(t)
	f := setup(t, testenv.Backend{Name: "postgres", DatabaseURL: pg.url()}, func(c *config.Config) { c.Server.RequestTimeout = time.Second })
	ctx := context.Background()
	_, adminKey, err := f.App.APIKeys.Create(ctx, "frozen-test", apikey.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	postTicket := func(c *http.Client, title string) (resp, error) {
		req := newRequest(t, "POST", f.PublicURL+"/api/tickets", `{"title":"`+title+`"}`, "Content-Type", "application/json")
		r, err := c.Do(req)
		if err != nil {
			return resp{}, err
		}
		defer r.Body.Close()
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		return resp{status: r.StatusCode, header: r.Header, body: buf[:n]}, nil
	}
	deduct := func(biz string) resp {
		return send(t, f.Client, newRequest(t, "POST", f.signed(t, f.app.AppKey, f.secret, "/api/v1/inventory/deduct",
			url.Values{"biz_no": {biz}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}}), ""))
	}
	// Warm up: pooled connections, the app's credentials cached.
	if r, err := postTicket(f.Client, "before"); err != nil || r.status != 201 {
		t.Fatalf("before: %v %+v", err, r)
	}
	if r := send(t, f.Client, newRequest(t, "GET", f.signed(t, f.app.AppKey, f.secret, "/api/v1/orders/query", url.Values{"order_no": {"SO1001"}}), "")); r.status != 200 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}

	// Every pooled connection used just now: reusing a connection idle
	// for more than a second starts with a ping, which would hang before
	// the INSERT is even sent. Fresh ones send it at once, into the frozen
	// server's socket, which is the case that must not commit later.
	var warm sync.WaitGroup
	for i := range 8 {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if r, err := postTicket(f.Client, "warm-"+strconv.Itoa(i)); err != nil || r.status != 201 {
				t.Errorf("warm-up: %v %+v", err, r)
			}
		}()
	}
	warm.Wait()
	thaw := pg.freeze(t)
	within := func(what string, start time.Time) {
		t.Helper()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s answered after %v: the deadline did not hold", what, d)
		}
	}

	// The very first request after the freeze.
	start := time.Now()
	r, err := postTicket(f.Client, "frozen-first")
	within("first ticket", start)
	if err != nil || r.status != 503 || r.object(t)["error"] != "unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("first ticket with the database frozen: %v HTTP %d %s", err, r.status, r.body)
	}

	// Many at once (on the connections just used): half wait for the
	// answer (503), half give up first.
	impatient := &http.Client{Timeout: 200 * time.Millisecond}
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := f.Client
			if i%2 == 1 {
				c = impatient
			}
			r, err := postTicket(c, "frozen-"+strconv.Itoa(i))
			if err == nil {
				statuses[i] = r.status
			}
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if i%2 == 0 && s != 503 {
			t.Errorf("waiting client %d: HTTP %d, want 503", i, s)
		}
	}

	start = time.Now()
	r = send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/api/tickets", ""))
	within("ticket list", start)
	if r.status != 503 || r.object(t)["error"] != "unavailable" {
		t.Errorf("ticket list: HTTP %d %s", r.status, r.body)
	}
	for name, target := range map[string]string{
		"signed query (cached app)": f.signed(t, f.app.AppKey, f.secret, "/api/v1/orders/query", url.Values{"order_no": {"SO1001"}}),
		"signed query (new app)":    f.signed(t, f.other.AppKey, f.otherSec, "/api/v2/orders/query", url.Values{"order_no": {"SO2001"}}),
	} {
		start = time.Now()
		r = send(t, f.Client, newRequest(t, "GET", target, ""))
		within(name, start)
		if m := r.object(t); r.status != 503 || m["code"] != float64(6000) {
			t.Errorf("%s: HTTP %d %s", name, r.status, r.body)
		}
	}
	start = time.Now()
	r = deduct("FROZEN-1")
	within("deduction", start)
	if m := r.object(t); r.status != 503 || m["code"] != float64(6000) {
		t.Errorf("deduction: HTTP %d %s", r.status, r.body)
	}
	start = time.Now()
	r = send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"`+userName+`","password":"`+userPassword+`"}`, "Content-Type", "application/json"))
	within("login", start)
	if r.status != 503 || r.object(t)["error"] != "unavailable" {
		t.Errorf("login: HTTP %d %s", r.status, r.body)
	}
	start = time.Now()
	r = send(t, f.Client, newRequest(t, "POST", f.AdminURL+"/graphql", `{"query":"mutation { createSku(input: {name: \"frozen\", stock: 1}) { id } }"}`,
		"Content-Type", "application/json", "X-API-Key", adminKey))
	within("GraphQL", start)
	if r.status != 503 || !strings.Contains(string(r.body), "UNAVAILABLE") {
		t.Errorf("GraphQL: HTTP %d %s", r.status, r.body)
	}

	thaw()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := postTicket(f.Client, "after")
		if err == nil && r.status == 201 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recovered 30 s after the thaw: %v %+v", err, r)
		}
		time.Sleep(50 * time.Millisecond) // polling pace
	}
	// Wait until the resumed backends have read what was queued for them
	// and ended (no other session active or inside a transaction), so that
	// anything they were going to commit is committed by now.
	admin, err := sql.Open("pgx", pg.url())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for {
		var busy int
		if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
			AND pid <> pg_backend_pid() AND (state = 'active' OR state LIKE 'idle in transaction%')`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still busy 30 s after the thaw", busy)
		}
		time.Sleep(20 * time.Millisecond) // polling pace
	}
	n, err := f.App.DB.Ticket.Query().Where(ticket.TitleHasPrefix("frozen")).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d tickets of requests that got no answer (or a 503) were committed after the thaw", n)
	}
	if rec, err := f.App.DB.IdempotencyRecord.Query().Where(idempotencyrecord.BizNo("FROZEN-1")).Count(ctx); err != nil || rec != 0 {
		t.Fatalf("%d records of the cut-off deduction (%v)", rec, err)
	}
	if r := deduct("FROZEN-1"); r.status != 200 {
		t.Fatalf("deduction retried after the thaw: HTTP %d %s", r.status, r.body)
	}
	if strings.Contains(f.Logs.String(), "status=500") {
		t.Fatal("a request was answered 500 while the database was frozen")
	}
}

// TestReadyzFrozenDatabase: /readyz checks the database and the key-value
// store at once, each within its own 2 s, and reports each truly: with the
// database frozen it says the database is unavailable and Redis ok (both
// checks sharing one budget, one after the other, used to blame Redis),
// and answers 200 (the replica can still serve what needs no database)
// within about 2 s.
func TestReadyzFrozenDatabase(t *testing.T) {
	pg := startPrivatePostgres(t)
	f := setup(t, testenv.Backend{Name: "postgres", DatabaseURL: pg.url(), RedisURL: testenv.RedisURL(t), KeyPrefix: testenv.KeyPrefix(t)},
		func(c *config.Config) { c.Redis.URL, c.Redis.KeyPrefix = testenv.RedisURL(t), testenv.KeyPrefix(t) })
	ready := func() (int, map[string]string, time.Duration) {
		t0 := time.Now()
		r := send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/readyz", ""))
		m := map[string]string{}
		for k, v := range r.object(t) {
			m[k], _ = v.(string)
		}
		return r.status, m, time.Since(t0)
	}
	if st, m, _ := ready(); st != 200 || m["database"] != "ok" || m["kv"] != "ok" {
		t.Fatalf("readyz before: %d %v", st, m)
	}
	thaw := pg.freeze(t)
	defer thaw()
	st, m, took := ready()
	if st != 200 || m["database"] != "unavailable" || m["kv"] != "ok" {
		t.Fatalf("readyz with the database frozen: %d %v, want 200 with database unavailable and kv ok", st, m)
	}
	if took > 3*time.Second {
		t.Fatalf("readyz took %v with the database frozen (each check has 2 s)", took)
	}
	thaw()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, m, _ := ready(); st == 200 && m["database"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("readyz does not say the database is ok within 10 s of the thaw")
		}
		time.Sleep(50 * time.Millisecond) // polling recovery
	}
}
