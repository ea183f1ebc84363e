package fleettest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/apikey"
	"gatehouse/internal/testenv/fleet"
)

// TestOutageLogsStateChangesNotRequests: while its Redis is down, a
// replica refusing hundreds of signed calls (503/6000) writes one ERROR
// for the change (kv unavailable) and a WARN summary at most once a
// second with the count of refused requests, not a line per request at
// ERROR; when Redis is back, one more ERROR says so (state ok, was
// unavailable). Tickets and the GraphQL admin, which need no Redis, are
// served all along.
func TestOutageLogsStateChangesNotRequests(t *testing.T) {
	t.Parallel()
	rds := fleet.StartRedis(t)
	f := setup(t, rds.URL())
	if _, r := f.query(t); !admitted(r) {
		t.Fatalf("signed call before the outage: %s", r)
	}
	_, adminKey, err := f.App.APIKeys.Create(context.Background(), "outage", apikey.RoleReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	mark := len(f.Logs.String()) // the lines before the outage are not counted
	rds.Kill()
	t0 := time.Now()
	var mu sync.Mutex
	refused, other := 0, map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Since(t0) < 3*time.Second {
				_, r := f.query(t)
				mu.Lock()
				if r.err == nil && r.status == 503 && r.code == 6000 {
					refused++
				} else {
					other[r.String()]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for time.Since(t0) < 3*time.Second {
			if r := f.Do(t, "POST", f.PublicURL+"/api/tickets", `{"title":"during the outage"}`, "Content-Type", "application/json"); r.Status != 201 {
				t.Errorf("ticket during the Redis outage: %d %s", r.Status, r.Body)
				return
			}
		}
	})
	wg.Go(func() {
		for time.Since(t0) < 3*time.Second {
			r := f.Do(t, "POST", f.AdminURL+"/graphql", `{"query":"{ apiKeys(first: 1) { totalCount } }"}`, "Content-Type", "application/json", "X-API-Key", adminKey)
			if r.Status != 200 || strings.Contains(string(r.Body), `"errors"`) {
				t.Errorf("GraphQL admin during the Redis outage: %d %s", r.Status, r.Body)
				return
			}
		}
	})
	wg.Wait()
	took := time.Since(t0)
	time.Sleep(1500 * time.Millisecond) // the last summary
	if refused < 50 || len(other) != 0 {
		t.Fatalf("during the outage: %d calls refused with 503/6000, others %v", refused, other)
	}
	lines := strings.Split(f.Logs.String()[mark:], "\n")
	var errors, summaries []string
	summed := 0
	for _, l := range lines {
		switch {
		case strings.Contains(l, "level=ERROR"):
			errors = append(errors, l)
		case strings.Contains(l, "level=WARN") && strings.Contains(l, "requests refused"):
			summaries = append(summaries, l)
			for _, f := range strings.Fields(l) {
				if v, ok := strings.CutPrefix(f, "refused_kv="); ok {
					n := 0
					for _, c := range v {
						n = n*10 + int(c-'0')
					}
					summed += n
				}
			}
		}
	}
	t.Logf("%d calls refused in %v: %d ERROR lines, %d summary lines counting %d", refused, took.Round(time.Millisecond), len(errors), len(summaries), summed)
	if len(errors) != 1 || !strings.Contains(errors[0], "dependency state changed") || !strings.Contains(errors[0], "dependency=kv") || !strings.Contains(errors[0], "state=unavailable") {
		t.Fatalf("want one ERROR, the kv store's change to unavailable; got %d:\n%s", len(errors), strings.Join(errors, "\n"))
	}
	if len(summaries) == 0 || float64(len(summaries)) > took.Seconds()+2.5 {
		t.Fatalf("%d summary lines in %v, want at least one and at most one a second:\n%s", len(summaries), took, strings.Join(summaries, "\n"))
	}
	if summed != refused {
		t.Fatalf("the summaries count %d refused requests, the client saw %d", summed, refused)
	}

	mark = len(f.Logs.String())
	rds.RestartEmpty(t)
	waitFor(t, 15*time.Second, func() bool { st, m := f.readyz(t); return st == 200 && m["kv"] == "ok" })
	back := 0
	for _, l := range strings.Split(f.Logs.String()[mark:], "\n") {
		if strings.Contains(l, "level=ERROR") {
			if !strings.Contains(l, "dependency=kv") || !strings.Contains(l, "state=ok") || !strings.Contains(l, "was=unavailable") {
				t.Fatalf("unexpected ERROR after Redis came back: %s", l)
			}
			back++
		}
	}
	if back != 1 {
		t.Fatalf("%d ERROR lines for Redis coming back, want 1:\n%s", back, f.Logs.String()[mark:])
	}
}
