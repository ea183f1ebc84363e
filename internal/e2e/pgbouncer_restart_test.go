package e2e_test

import (
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
)

// deploySampleSettings are the timing settings of docs/deploy.md's
// PgBouncer sample (its [pgbouncer] section): the test runs with what the
// operator is told to set.
func deploySampleSettings(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		k, _, ok := strings.Cut(l, "=")
		switch k = strings.TrimSpace(k); {
		case !ok:
		case k == "server_login_retry", k == "query_wait_timeout", k == "server_connect_timeout":
			out = append(out, strings.TrimSpace(l))
		}
	}
	for _, want := range []string{"server_login_retry", "query_wait_timeout"} {
		if !strings.Contains(strings.Join(out, "\n"), want) {
			t.Fatalf("docs/deploy.md's PgBouncer sample does not set %s", want)
		}
	}
	return out
}

// TestPostgresRestartBehindPgBouncer: gatehouse reaches a Postgres of the
// test through PgBouncer (transaction mode, with docs/deploy.md's
// server_login_retry and query_wait_timeout), under a steady load of
// ticket creations, while Postgres is restarted (fast shutdown, then
// start). The requests that fail do so quickly, with 503, and the time
// from the first failure to the last is at most 3 s. PgBouncer's defaults
// (server_login_retry 15 s, query_wait_timeout 120 s) made it 15 s of
// failures, requests hanging 10 s.
func TestPostgresRestartBehindPgBouncer(t *testing.T) {
	pg := startPrivatePostgres(t)
	bouncer := fleet.StartPgBouncerTo(t, pg.url(), "transaction", deploySampleSettings(t)...)
	f := setup(t, testenv.Backend{Name: "postgres", DatabaseURL: bouncer.URL(t, pg.url())})
	client := &http.Client{Timeout: 15 * time.Second}
	type outcome struct {
		start, end time.Time
		status     int
		err        error
	}
	var mu sync.Mutex
	var outs []outcome
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := outcome{start: time.Now()}
				res, err := client.Post(f.PublicURL+"/api/tickets", "application/json", strings.NewReader(`{"title":"restart"}`))
				o.end, o.err = time.Now(), err
				if err == nil {
					o.status = res.StatusCode
					res.Body.Close()
				}
				mu.Lock()
				outs = append(outs, o)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // a steady rate, not a flood
			}
		})
	}
	time.Sleep(time.Second)
	restarted := time.Now()
	pg.stop(t)
	pg.start(t)
	t.Logf("Postgres restarted in %v", time.Since(restarted).Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()

	sort.Slice(outs, func(i, j int) bool { return outs[i].start.Before(outs[j].start) })
	var first, last time.Time
	var failed, slow int
	var slowest time.Duration
	kinds := map[string]int{}
	for _, o := range outs {
		if o.err == nil && o.status == 201 {
			continue
		}
		failed++
		if first.IsZero() {
			first = o.start
		}
		if o.end.After(last) {
			last = o.end
		}
		d := o.end.Sub(o.start)
		slowest = max(slowest, d)
		if o.err != nil || o.status != 503 || d > time.Second {
			slow++
		}
		if o.err != nil {
			kinds[o.err.Error()]++
		} else {
			kinds[http.StatusText(o.status)]++
		}
	}
	window := last.Sub(first)
	t.Logf("%d requests, %d failed over %v (slowest failure %v): %v", len(outs), failed, window.Round(time.Millisecond), slowest.Round(time.Millisecond), kinds)
	if len(outs) < 100 || outs[len(outs)-1].status != 201 {
		t.Fatalf("%d requests; the last %+v: the load did not run through the restart", len(outs), outs[len(outs)-1])
	}
	if window > 3*time.Second {
		t.Errorf("requests failed for %v around the restart, want at most 3 s", window)
	}
	if slow > 0 {
		t.Errorf("%d failures were not a 503 within 1 s (slowest %v): %v", slow, slowest, kinds)
	}
}
