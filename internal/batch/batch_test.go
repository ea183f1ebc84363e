package batch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

func sum(a, b int) int { return a + b }

func TestAddMergesAndFlushWrites(t *testing.T) {
	var mu sync.Mutex
	written := map[string]int{}
	b := New("test", slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, sum,
		func(_ context.Context, batch map[string]int) (map[string]int, error) {
			mu.Lock()
			defer mu.Unlock()
			for k, v := range batch {
				written[k] += v
			}
			return nil, nil
		})
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); b.Add("a", 1); b.Add("b", 2) }()
	}
	wg.Wait()
	if p := b.Pending(); p["a"] != 100 || p["b"] != 200 {
		t.Fatalf("pending %v", p)
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if written["a"] != 100 || written["b"] != 200 || len(b.Pending()) != 0 {
		t.Fatalf("written %v, pending %v", written, b.Pending())
	}
}

func TestFailedEntriesStayPending(t *testing.T) {
	boom := errors.New("boom")
	fail := true
	b := New("test", slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, sum,
		func(_ context.Context, batch map[string]int) (map[string]int, error) {
			if fail {
				return batch, boom
			}
			return nil, nil
		})
	b.Add("a", 3)
	if err := b.Flush(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	b.Add("a", 1) // merged with the requeued 3
	if p := b.Pending(); p["a"] != 4 {
		t.Fatalf("pending %v", p)
	}
	fail = false
	if err := b.Flush(context.Background()); err != nil || len(b.Pending()) != 0 {
		t.Fatalf("%v %v", err, b.Pending())
	}
}

func TestStartFlushesPeriodicallyAndCloseFlushesTheRest(t *testing.T) {
	flushed := make(chan int, 100)
	b := New("test", slog.New(slog.NewTextHandler(io.Discard, nil)), 10*time.Millisecond, sum,
		func(_ context.Context, batch map[string]int) (map[string]int, error) {
			flushed <- batch["a"]
			return nil, nil
		})
	b.Start()
	b.Start() // idempotent
	b.Add("a", 1)
	select {
	case n := <-flushed:
		if n != 1 {
			t.Fatalf("flushed %d", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no periodic flush")
	}
	b.Add("a", 5)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(context.Background()); err != nil { // twice is fine
		t.Fatal(err)
	}
	got := 0
	for len(flushed) > 0 {
		got += <-flushed
	}
	if got != 5 {
		t.Fatalf("Close flushed %d, want 5", got)
	}
}
