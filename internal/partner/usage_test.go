package partner

import (
	"context"
	"gatehouse/internal/store/storetest"
	"io"
	"log/slog"
	"testing"
	"time"

	"gatehouse/ent/apiusage"
	"gatehouse/internal/testenv"
)

// TestUsageAddsUp: two counters (two replicas) flushing into one table add
// their counts per app, version and day.
func TestUsageAddsUp(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		s := newService(t, db)
		app, _, err := s.Create(ctx, CreateInput{AppName: "a"})
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		u1, u2 := NewUsage(db.Client, log, time.Hour), NewUsage(db.Client, log, time.Hour)
		day1 := time.Date(2026, 11, 22, 23, 59, 59, 0, time.UTC)
		clk := newClock(day1)
		u1.now, u2.now = clk.Now, clk.Now
		for range 3 {
			u1.Add(app.ID, "v1")
		}
		u2.Add(app.ID, "v1")
		u2.Add(app.ID, "v2")
		clk.Advance(time.Second) // next UTC day
		u1.Add(app.ID, "v1")
		if err := u1.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := u2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		u1.Add(app.ID, "v1")
		if err := u1.Close(ctx); err != nil { // Close flushes
			t.Fatal(err)
		}
		rows := db.APIUsage.Query().Where(apiusage.AppID(app.ID)).AllX(ctx)
		got := map[string]int64{}
		for _, r := range rows {
			got[r.Version+" "+r.Day] = r.Count
		}
		want := map[string]int64{"v1 2026-11-22": 4, "v2 2026-11-22": 1, "v1 2026-11-23": 2}
		if len(got) != len(want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("rows %v, want %v", got, want)
			}
		}
		// A second flush with nothing new changes nothing.
		if err := u2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if n := db.APIUsage.Query().CountX(ctx); n != 3 {
			t.Fatalf("%d rows", n)
		}
	})
}

// TestUsageKeepsCountsOnFailure: a flush that cannot write keeps its counts
// for the next one.
func TestUsageKeepsCountsOnFailure(t *testing.T) {
	db := storetest.Open(t, testenv.Backend{Name: "sqlite"})
	ctx := context.Background()
	s := newService(t, db)
	app, _, err := s.Create(ctx, CreateInput{AppName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	u := NewUsage(db.Client, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour)
	u.Add(app.ID, "v1")
	u.Add(app.ID, "v1")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := u.Flush(canceled); err == nil {
		t.Fatal("flush with a canceled context succeeded")
	}
	if err := u.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if r := db.APIUsage.Query().OnlyX(ctx); r.Count != 2 {
		t.Fatalf("count %d after a failed and a good flush, want 2", r.Count)
	}
}
