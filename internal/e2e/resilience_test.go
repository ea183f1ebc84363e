package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
)

// outcome is one signed request's result during the fault.
type outcome struct {
	status, code int
	retryAfter   string
	took         time.Duration
	err          error
}

// TestRedisOutage stops the Redis gatehouse uses (a private redis-server)
// while signed requests run, twice: killed (connections refused) and
// frozen (SIGSTOP: connections hang). Signed endpoints must answer
// 503/6000 with Retry-After within 1 s — never let a request through
// unchecked, never a 500 — tickets keep working, /readyz stays 200 (the
// replica still serves what needs no Redis) and names the kv store
// "unavailable", and once Redis is back the signed endpoints recover on
// their own.
func TestRedisOutage(t *testing.T) {
	rds := fleet.StartRedis(t)
	dbURL := testenv.PostgresURL(t)
	f := setup(t, testenv.Backend{Name: "postgres", DatabaseURL: dbURL}, func(c *config.Config) {
		c.Redis.URL = rds.URL()
		c.Redis.KeyPrefix = "resilience:"
	})
	query := func() outcome {
		u := f.signed(t, f.app.AppKey, f.secret, "/api/v1/orders/query", url.Values{"order_no": {"SO1001"}})
		t0 := time.Now()
		res, err := f.Client.Get(u)
		o := outcome{took: time.Since(t0), err: err}
		if err != nil {
			return o
		}
		defer res.Body.Close()
		var env struct{ Code int }
		_ = json.NewDecoder(res.Body).Decode(&env)
		o.status, o.code, o.retryAfter = res.StatusCode, env.Code, res.Header.Get("Retry-After")
		return o
	}
	if o := query(); o.status != 200 {
		t.Fatalf("before the fault: %+v", o)
	}

	// load runs signed queries from 4 goroutines until stop is closed.
	load := func(stop <-chan struct{}) func() []outcome {
		var mu sync.Mutex
		var out []outcome
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					o := query()
					mu.Lock()
					out = append(out, o)
					mu.Unlock()
				}
			})
		}
		return func() []outcome { wg.Wait(); return out }
	}
	ticketsWork := func(phase string) {
		t.Helper()
		r := send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/api/tickets", `{"title":"during `+phase+`"}`, "Content-Type", "application/json"))
		if r.status != 201 {
			t.Fatalf("%s: ticket create: %d %s", phase, r.status, r.body)
		}
		if r := send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/api/tickets?limit=5", "")); r.status != 200 {
			t.Fatalf("%s: ticket list: %d %s", phase, r.status, r.body)
		}
	}
	// checkOutage: during the fault every signed reply is a 503/6000 with
	// Retry-After (or a 200 that was admitted just before), within 1 s.
	checkOutage := func(phase string, got []outcome) {
		t.Helper()
		var n503 int
		for _, o := range got {
			switch {
			case o.err != nil:
				t.Errorf("%s: transport error %v", phase, o.err)
			case o.status == 503 && o.code == 6000 && o.retryAfter != "":
				n503++
				if o.took > time.Second {
					t.Errorf("%s: a 503 took %v (over 1 s)", phase, o.took)
				}
			case o.status == 200:
			default:
				t.Errorf("%s: HTTP %d code %d after %v", phase, o.status, o.code, o.took)
			}
		}
		if n503 == 0 {
			t.Fatalf("%s: no 503/6000 in %d replies", phase, len(got))
		}
		t.Logf("%s: %d replies, %d of them 503/6000", phase, len(got), n503)
	}
	// recovers polls until signed queries succeed again (bounded).
	recovers := func(phase string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			o := query()
			if o.status == 200 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not recovered 10 s after Redis came back: %+v", phase, o)
			}
		}
	}
	readyz := func() (int, any) {
		r := send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/readyz", ""))
		return r.status, r.object(t)["kv"]
	}

	for _, fault := range []struct {
		name          string
		start, start2 func()
	}{
		{name: "killed", start: rds.Kill, start2: func() { rds.RestartEmpty(t) }},
		{name: "frozen", start: rds.Freeze, start2: rds.Thaw},
	} {
		t.Run(fault.name, func(t *testing.T) {
			stop := make(chan struct{})
			fault.start()
			wait := load(stop)
			ticketsWork("Redis " + fault.name)
			if s, kv := readyz(); s != 200 || kv != "unavailable" {
				t.Errorf("/readyz %d, kv %v while Redis is %s", s, kv, fault.name)
			}
			// The outage lasts 2 s of load.
			<-time.After(2 * time.Second)
			close(stop)
			checkOutage("Redis "+fault.name, wait())
			fault.start2()
			recovers("Redis " + fault.name)
			if s, kv := readyz(); s != 200 || kv != "ok" {
				t.Errorf("/readyz %d, kv %v after Redis came back", s, kv)
			}
			ticketsWork("after Redis " + fault.name)
		})
	}
}

// privatePostgres is a Postgres cluster of this test (initdb as the
// postgres user), so that it can be restarted without touching the shared one.
type privatePostgres struct {
	bin, dir string
	port     int
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if _, err := exec.LookPath("runuser"); len(bins) == 0 || err != nil || os.Geteuid() != 0 {
		if testenv.Required() {
			t.Fatal("a private Postgres cluster needs initdb and root (runuser -u postgres); required in CI")
		}
		t.Skip("a private Postgres cluster needs initdb and root (runuser -u postgres); not available here")
	}
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("no postgres user (required in CI): %v", err)
		}
		t.Skipf("no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	dir, err := os.MkdirTemp("", "gatehouse-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &privatePostgres{bin: filepath.Dir(bins[len(bins)-1]), dir: dir, port: l.Addr().(*net.TCPAddr).Port}
	l.Close()
	if out, err := p.run("initdb", "-D", dir+"/data", "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = p.run("pg_ctl", "-D", dir+"/data", "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	})
	p.start(t)
	return p
}

func (p *privatePostgres) run(tool string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, tool)}, args...)...).CombinedOutput()
}

func (p *privatePostgres) start(t *testing.T) {
	t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", p.port, p.dir)
	if out, err := p.run("pg_ctl", "-D", p.dir+"/data", "-o", opts, "-l", p.dir+"/log", "-w", "start"); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
}

func (p *privatePostgres) stop(t *testing.T) {
	t.Helper()
	if out, err := p.run("pg_ctl", "-D", p.dir+"/data", "-m", "fast", "-w", "stop"); err != nil {
		t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func (p *privatePostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// TestPostgresRestart restarts the database under a running gatehouse:
// while it is down, requests fail fast with a 5xx in their family's shape
// (never hang) and /readyz stays 200 naming the database "unavailable"
// (routes that need no database keep serving); once it is back, tickets and signed
// queries work again without restarting gatehouse.
func TestPostgresRestart(t *testing.T) {
	pg := startPrivatePostgres(t)
	f := setup(t, testenv.Backend{Name: "postgres", DatabaseURL: pg.url()})
	ticket := func() resp {
		return send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/api/tickets", `{"title":"restart"}`, "Content-Type", "application/json"))
	}
	// The other app has not called yet, so its credentials are not cached
	// when the database goes down.
	signed := func(key, sec, orderNo string) resp {
		return send(t, f.Client, newRequest(t, "GET", f.signed(t, key, sec, "/api/v1/orders/query", url.Values{"order_no": {orderNo}}), ""))
	}
	if r := ticket(); r.status != 201 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	if r := signed(f.app.AppKey, f.secret, "SO1001"); r.status != 200 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}

	pg.stop(t)
	t0 := time.Now()
	r := ticket()
	if r.status < 500 || time.Since(t0) > 5*time.Second {
		t.Fatalf("ticket with the database down: HTTP %d after %v: %s", r.status, time.Since(t0), r.body)
	}
	if m := r.object(t); m["error"] == nil || m["message"] == nil {
		t.Fatalf("ticket error not in the documented shape: %s", r.body)
	}
	t0 = time.Now()
	r = signed(f.other.AppKey, f.otherSec, "SO2001")
	if m := r.object(t); r.status != 503 || m["code"] != float64(6000) || r.header.Get("Retry-After") == "" || time.Since(t0) > 5*time.Second {
		t.Fatalf("signed query with the database down: HTTP %d after %v: %s", r.status, time.Since(t0), r.body)
	}
	if r := send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/readyz", "")); r.status != 200 || r.object(t)["database"] != "unavailable" {
		t.Errorf("/readyz with the database down: %d %s", r.status, r.body)
	}

	pg.start(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		rt, rs := ticket(), signed(f.other.AppKey, f.otherSec, "SO2001")
		if rt.status == 201 && rs.status == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling pace
		if time.Now().After(deadline) {
			t.Fatalf("not recovered 15 s after the database came back: ticket %d %s; signed %d %s", rt.status, rt.body, rs.status, rs.body)
		}
	}
	if r := send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/readyz", "")); r.status != 200 || r.object(t)["database"] != "ok" {
		t.Errorf("/readyz after the restart: %d %s", r.status, r.body)
	}
}
