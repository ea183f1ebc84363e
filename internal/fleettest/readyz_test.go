package fleettest_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/kv"
	"gatehouse/internal/testenv/fleet"
)

// TestReadyzRefusedWrites: a Redis that answers but refuses writes (a
// demoted master answering READONLY; a cluster node named by a single-node
// URL, answering MOVED) is reported by /readyz as kv "read-only" while
// the replica stays in rotation (200: what needs no Redis is served), and
// calls that need Redis answer 503, not 500. Once the server takes writes
// again, /readyz says kv "ok" without a restart.
func TestReadyzRefusedWrites(t *testing.T) {
	t.Parallel()
	t.Run("demoted master", func(t *testing.T) {
		t.Parallel()
		rds := fleet.StartRedis(t)
		other := fleet.StartRedis(t)
		f := setup(t, rds.URL())
		if st, m := f.readyz(t); st != 200 || m["kv"] != "ok" {
			t.Fatalf("readyz: %d %v", st, m)
		}
		c := rds.Client()
		ctx := context.Background()
		if err := c.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(other.Port)).Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool { return !fleet.Writable(c) })
		if st, m := f.readyz(t); st != 200 || m["kv"] != "read-only" || m["database"] != "ok" {
			t.Fatalf("readyz on a READONLY Redis: %d %v", st, m)
		}
		if _, r := f.query(t); r.status != 503 || r.code != 6000 {
			t.Fatalf("signed call on a READONLY Redis: %s", r)
		}
		if r := f.Do(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"`+userName+`","password":"`+userPassword+`"}`, "Content-Type", "application/json"); r.Status != 503 {
			t.Fatalf("login on a READONLY Redis: %d %s", r.Status, r.Body)
		}
		if err := c.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool { st, m := f.readyz(t); return st == 200 && m["kv"] == "ok" })
	})
	t.Run("cluster node by a single-node URL", func(t *testing.T) {
		t.Parallel()
		cl := fleet.StartCluster(t, 3)
		f := setup(t, cl.Nodes[0].URL())
		if st, m := f.readyz(t); st != 200 || m["kv"] != "read-only" {
			t.Fatalf("readyz on a cluster node named by redis://: %d %v", st, m)
		}
		// What a caller gets there: served (the app's keys live on this
		// node) or 503/6000 (they are MOVED elsewhere), never a 500.
		for range 5 {
			if _, r := f.query(t); !admitted(r) && (r.status != 503 || r.code != 6000) {
				t.Fatalf("signed call on a cluster node named by redis://: %s", r)
			}
		}
		if r := f.Do(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"`+userName+`","password":"`+userPassword+`"}`, "Content-Type", "application/json"); r.Status != 200 && r.Status != 503 {
			t.Fatalf("login on a cluster node named by redis://: %d %s", r.Status, r.Body)
		}
		// A real MOVED reply (the node asked to write a key another master
		// owns) is a refused write, as /readyz reports it.
		c := cl.Nodes[0].Client()
		var moved error
		for i := 0; moved == nil && i < 100; i++ {
			moved = c.Set(context.Background(), "fleet:moved:"+strconv.Itoa(i), "1", time.Second).Err()
		}
		if moved == nil || !strings.HasPrefix(moved.Error(), "MOVED") || !kv.WriteRefused(moved) {
			t.Fatalf("a write to a key of another master: %v, want MOVED, a refused write", moved)
		}
	})
}

// TestReadyzFrozenRedis: /readyz checks the database and the key-value
// store at once, each within its own 2 s, and reports each truly: with
// Redis frozen (SIGSTOP: connections open, nothing answers) it says the kv
// store is unavailable and the database ok, and answers (200: the replica
// still serves what needs no Redis) within about 2 s rather than waiting
// for Redis. Once Redis is thawed, /readyz says kv "ok" again without a
// restart.
func TestReadyzFrozenRedis(t *testing.T) {
	t.Parallel()
	rds := fleet.StartRedis(t)
	f := setup(t, rds.URL())
	if st, m := f.readyz(t); st != 200 || m["kv"] != "ok" || m["database"] != "ok" {
		t.Fatalf("readyz before: %d %v", st, m)
	}
	rds.Freeze()
	defer rds.Thaw()
	t0 := time.Now()
	st, m := f.readyz(t)
	took := time.Since(t0)
	if st != 200 || m["kv"] != "unavailable" || m["database"] != "ok" {
		t.Fatalf("readyz with Redis frozen: %d %v, want 200 with kv unavailable and database ok", st, m)
	}
	t.Logf("readyz answered in %v with Redis frozen", took)
	if took > 3*time.Second {
		t.Fatalf("readyz took %v with Redis frozen (each check has 2 s)", took)
	}
	rds.Thaw()
	waitFor(t, 10*time.Second, func() bool { st, m := f.readyz(t); return st == 200 && m["kv"] == "ok" })
}
