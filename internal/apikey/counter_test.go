package apikey_test

import (
	"context"
	"gatehouse/internal/store/storetest"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/apikey"
	"gatehouse/internal/testenv"
)

// TestCounterBatches: many concurrent uses become one increment per key
// per flush; two counters (two replicas) add up; last_used_at never moves
// backwards; a failed flush keeps its counts.
func TestCounterBatches(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		svc := apikey.NewService(db.Client, nil)
		k1, _, _ := svc.Create(ctx, "one", apikey.RoleAdmin)
		k2, _, _ := svc.Create(ctx, "two", apikey.RoleAdmin)
		replicaA := apikey.NewCounter(db.Client, quietLog(), time.Hour)
		replicaB := apikey.NewCounter(db.Client, quietLog(), time.Hour)

		t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				c := replicaA
				if i%2 == 1 {
					c = replicaB
				}
				c.Add(k1.ID, t0.Add(time.Duration(i)*time.Millisecond))
				if i%4 == 0 {
					c.Add(k2.ID, t0)
				}
			})
		}
		wg.Wait()
		if replicaA.Pending()+replicaB.Pending() != 250 {
			t.Fatalf("pending %d + %d", replicaA.Pending(), replicaB.Pending())
		}
		// B holds the latest use of k1 (i = 199); flushing it first and A
		// (older uses only) second must keep B's time.
		for _, c := range []*apikey.Counter{replicaB, replicaA} {
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if c.Pending() != 0 {
				t.Fatalf("pending after flush: %d", c.Pending())
			}
		}
		r1, r2 := db.APIKey.GetX(ctx, k1.ID), db.APIKey.GetX(ctx, k2.ID)
		if r1.UsageCount != 200 || r2.UsageCount != 50 {
			t.Fatalf("usage %d and %d, want 200 and 50", r1.UsageCount, r2.UsageCount)
		}
		if r1.LastUsedAt == nil || !r1.LastUsedAt.Equal(t0.Add(199*time.Millisecond)) {
			t.Fatalf("last_used_at %v", r1.LastUsedAt)
		}
		// Nothing pending: a flush writes nothing.
		if err := replicaA.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if db.APIKey.GetX(ctx, k1.ID).UsageCount != 200 {
			t.Fatal("an empty flush changed the count")
		}
		// A use of a key that no longer exists is dropped, not retried forever.
		replicaA.Add(987654, t0)
		if err := replicaA.Flush(ctx); err != nil || replicaA.Pending() != 0 {
			t.Fatalf("missing key: %v, pending %d", err, replicaA.Pending())
		}
	})
}

func TestCounterKeepsCountsWhenFlushFails(t *testing.T) {
	db := storetest.Open(t, testenv.Backend{Name: "sqlite"})
	ctx := context.Background()
	k, _, err := apikey.NewService(db.Client, nil).Create(ctx, "k", apikey.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	c := apikey.NewCounter(db.Client, quietLog(), time.Hour)
	for range 3 {
		c.Add(k.ID, time.Now())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Flush(cancelled); err == nil {
		t.Fatal("a flush with a cancelled context succeeded")
	}
	if c.Pending() != 3 {
		t.Fatalf("pending after a failed flush: %d", c.Pending())
	}
	c.Add(k.ID, time.Now())
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := db.APIKey.GetX(ctx, k.ID).UsageCount; got != 4 {
		t.Fatalf("usage %d, want 4", got)
	}
}

// TestCounterPeriodicFlushAndClose: Start writes within the interval with
// no call to Flush; Close writes the rest and stops.
func TestCounterPeriodicFlushAndClose(t *testing.T) {
	db := storetest.Open(t, testenv.Backend{Name: "sqlite"})
	ctx := context.Background()
	k, _, _ := apikey.NewService(db.Client, nil).Create(ctx, "k", apikey.RoleAdmin)
	c := apikey.NewCounter(db.Client, quietLog(), 20*time.Millisecond)
	c.Start()
	c.Add(k.ID, time.Now())
	deadline := time.Now().Add(5 * time.Second)
	for db.APIKey.GetX(ctx, k.ID).UsageCount != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the periodic flush did not write the use")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Add(k.ID, time.Now())
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := db.APIKey.GetX(ctx, k.ID).UsageCount; got != 2 {
		t.Fatalf("after Close: %d", got)
	}
}
