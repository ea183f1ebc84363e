package fleettest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/testenv/fleet"
)

// TestReadyzRefusedWrites: a Redis that answers but refuses writes (a
// demoted master answering READONLY; a cluster node named by a single-node
// URL, answering MOVED) takes the replica out of rotation: /readyz 503
// with kv "refuses_writes", and signed calls answer 503, not 500. Once the
// server takes writes again, /readyz is 200 without a restart.
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
		if st, m := f.readyz(t); st != 503 || m["kv"] != "refuses_writes" || m["database"] != "ok" {
			t.Fatalf("readyz on a READONLY Redis: %d %v", st, m)
		}
		if _, r := f.query(t); r.status != 503 || r.code != 6000 {
			t.Fatalf("signed call on a READONLY Redis: %s", r)
		}
		if err := c.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool { st, _ := f.readyz(t); return st == 200 })
	})
	t.Run("cluster node by a single-node URL", func(t *testing.T) {
		t.Parallel()
		cl := fleet.StartCluster(t, 3)
		f := setup(t, cl.Nodes[0].URL())
		if st, m := f.readyz(t); st != 503 || m["kv"] != "refuses_writes" {
			t.Fatalf("readyz on a cluster node named by redis://: %d %v", st, m)
		}
	})
}

// TestReadyzFrozenRedis: /readyz checks the database and the key-value
// store at once, each within its own 2 s, and reports each truly: with
// Redis frozen (SIGSTOP: connections open, nothing answers) it says the kv
// store is unavailable and the database ok, and answers within about 2 s
// rather than waiting for Redis. Once Redis is thawed, /readyz is 200
// again without a restart.
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
	if st != 503 || m["kv"] != "unavailable" || m["database"] != "ok" {
		t.Fatalf("readyz with Redis frozen: %d %v, want 503 with kv unavailable and database ok", st, m)
	}
	t.Logf("readyz answered in %v with Redis frozen", took)
	if took > 3*time.Second {
		t.Fatalf("readyz took %v with Redis frozen (each check has 2 s)", took)
	}
	rds.Thaw()
	waitFor(t, 10*time.Second, func() bool { st, _ := f.readyz(t); return st == 200 })
}
