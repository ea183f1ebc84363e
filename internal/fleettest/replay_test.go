package fleettest_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/testenv/fleet"
)

// TestReplayAfterRedisLoss: a signed URL used before Redis lost its data
// (restarted empty, flushed) is refused after the loss (401/4003: signed
// before the replay memory started), never served again; a request signed
// after the loss is admitted; /readyz shows the new start.
func TestReplayAfterRedisLoss(t *testing.T) {
	t.Parallel()
	for _, loss := range []struct {
		name string
		do   func(t *testing.T, r *fleet.Redis)
	}{
		{"restarted empty", func(t *testing.T, r *fleet.Redis) { r.RestartEmpty(t) }},
		{"flushed", func(t *testing.T, r *fleet.Redis) { r.Flush(t) }},
	} {
		t.Run(loss.name, func(t *testing.T) {
			t.Parallel()
			rds := fleet.StartRedis(t)
			f := setup(t, rds.URL())
			used, r := f.query(t)
			if !admitted(r) {
				t.Fatalf("first use: %s", r)
			}
			if r := f.call("GET", used); r.code != 4004 {
				t.Fatalf("replay before the loss: %s, want 4004", r)
			}
			_, before := f.readyz(t)
			loss.do(t, rds)
			// Connections pooled before a restart fail once each (503).
			waitFor(t, 5*time.Second, func() bool { r = f.call("GET", used); return r.status != 503 })
			if !refusedReplay(r) || r.code != 4003 {
				t.Fatalf("replay after Redis was %s: %s, want 401/4003 (signed before the replay memory started)", loss.name, r)
			}
			st, after := f.readyz(t)
			// Compared as times: RFC 3339 drops trailing zeros, so
			// "…:30Z" sorts after "…:30.21Z" as text.
			start, err := time.Parse(time.RFC3339Nano, after["replay_memory_start"])
			was, errBefore := time.Parse(time.RFC3339Nano, before["replay_memory_start"])
			if st != 200 || err != nil || errBefore != nil || !start.After(was) {
				t.Fatalf("readyz after the loss: %d %v (before: %v)", st, after, before)
			}
			// The start is rounded up to the next millisecond: sign after it.
			waitFor(t, time.Second, func() bool { return time.Now().After(start) })
			if _, r := f.query(t); !admitted(r) {
				t.Fatalf("a request signed after the loss: %s", r)
			}
		})
	}
}

// TestSentinelFailoverUnderLoad demotes the master while four clients send
// signed queries, to a replica that missed the newest nonces (they are
// deleted on it before the failover, as a lagging replica would miss
// them; the epoch keys, older, did reach it). Calls fail with 503 (never
// 500, never a replay served) until the client finds the new master,
// then succeed again within 10 s of it, without a restart. Every URL
// used before the failover is refused afterwards.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	t.Parallel()
	g := fleet.StartSentinelGroup(t)
	f := setup(t, g.URL())

	var (
		mu   sync.Mutex
		used []string
		bad  []string
	)
	var n503, n200 atomic.Int64
	var lastFail atomic.Int64 // unix nanos of the latest failed call
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
				u, r := f.query(t)
				switch {
				case admitted(r):
					n200.Add(1)
					mu.Lock()
					used = append(used, u)
					mu.Unlock()
				case r.err == nil && r.status == 429:
					// Four clients on loopback outrun the app's 1 000 a second.
				case r.err == nil && r.status == 503 && r.code == 6000:
					n503.Add(1)
					lastFail.Store(time.Now().UnixNano())
				case r.err == nil && r.status == 401 && r.code == 4003 && strings.Contains(r.message, "replay memory"):
					// Signed just before the new master's start.
					lastFail.Store(time.Now().UnixNano())
				default:
					mu.Lock()
					bad = append(bad, r.String())
					mu.Unlock()
				}
			}
		})
	}
	waitFor(t, 10*time.Second, func() bool { return n200.Load() >= 50 })

	// The replica misses the newest writes: every nonce it holds goes.
	replica := g.Replica(t).Client()
	ctx := context.Background()
	if err := replica.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
		t.Fatal(err)
	}
	keys, err := replica.Keys(ctx, "fleet:admit:*:n:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("nonce keys on the replica: %d %v", len(keys), err)
	}
	if err := replica.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	newMaster := g.Failover(t)
	promoted := time.Now()
	t.Logf("failover to %s took %v", newMaster.Addr(), promoted.Sub(t0))
	// Recovery: a successful call after the new master took writes.
	before := n200.Load()
	waitFor(t, 10*time.Second, func() bool { return n200.Load() > before+20 })
	recovered := time.Since(promoted)
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d calls answered neither 404/5001, 429, 503/6000 nor 4003 during the failover: %v", len(bad), bad[:min(len(bad), 5)])
	}
	if lf := lastFail.Load(); lf != 0 && time.Unix(0, lf).Sub(promoted) > 10*time.Second {
		t.Fatalf("calls still failed %v after the new master", time.Unix(0, lf).Sub(promoted))
	}
	t.Logf("%d admitted, %d answered 503 during the failover; back %v after the new master (last failure %v after it)",
		n200.Load(), n503.Load(), recovered, time.Unix(0, lastFail.Load()).Sub(promoted))

	// Every URL used before the failover, replayed now.
	mu.Lock()
	defer mu.Unlock()
	replayed := 0
	for _, u := range used {
		if r := f.call("GET", u); !refusedReplay(r) {
			t.Fatalf("a URL used before the failover, replayed after it: %s", r)
		}
		replayed++
	}
	t.Logf("%d used URLs replayed after the failover: all refused", replayed)
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(10 * time.Millisecond) // polling the load's progress
	}
}
