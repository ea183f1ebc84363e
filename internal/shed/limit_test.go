package shed

import (
	"testing"
	"time"
)

// TestNext: a congested window cuts the limit to 0.8 of the concurrency
// in use, never below the minimum; a calm window grows the limit by an
// eighth only when the limit was used, never past the maximum.
func TestNext(t *testing.T) {
	const lo, hi = 32, 1024
	for _, c := range []struct {
		name               string
		cur, peak, refused int64
		congested          bool
		want               int64
	}{
		{"calm and idle: unchanged", 100, 10, 0, false, 100},
		{"calm, refusing: grows by an eighth", 100, 100, 5, false, 112},
		{"calm, three quarters used: grows", 100, 75, 0, false, 112},
		{"calm at the ceiling", hi, hi, 9, false, hi},
		{"congested: 0.8 of the concurrency in use", 200, 100, 0, true, 80},
		{"congested: not below the minimum", 40, 40, 3, true, lo},
	} {
		if got := next(c.cur, c.peak, c.refused, c.congested, lo, hi); got != c.want {
			t.Errorf("%s: next(%d, peak %d, refused %d) = %d, want %d", c.name, c.cur, c.peak, c.refused, got, c.want)
		}
	}
}

// TestLimitAdmitsUpToItsLimit: TryAcquire admits the limit's worth of
// requests and refuses the next until one is released.
func TestLimitAdmitsUpToItsLimit(t *testing.T) {
	l := NewLimit(3, 3, time.Second)
	for i := range 3 {
		if !l.TryAcquire() {
			t.Fatalf("request %d refused under the limit", i+1)
		}
	}
	if l.TryAcquire() {
		t.Fatal("a fourth request admitted with a limit of 3")
	}
	l.Release()
	if !l.TryAcquire() {
		t.Fatal("refused after a release")
	}
	if l.InFlight() != 3 {
		t.Fatalf("in flight %d, want 3", l.InFlight())
	}
}

// TestLimitShrinksWhenWorkWaits: goroutines that keep the process's only
// CPU busy make runnable work wait past the target; the limit in use
// then drops from where it had grown within a few windows.
func TestLimitShrinksWhenWorkWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("spins the CPU for about a second")
	}
	l := NewLimit(8, 1024, 200*time.Microsecond)
	l.limit.Store(64) // as if grown under an earlier load
	for range 64 {
		l.TryAcquire()
	}
	stop := make(chan struct{})
	defer close(stop)
	for range 64 { // more runnable goroutines than CPUs: each waits
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
					spin(50 * time.Microsecond)
				}
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.Current() >= 64 && time.Now().Before(deadline) {
		time.Sleep(Window / 2)
		l.Release() // a request ends (and lets the limit revise)…
		l.TryAcquire()
	}
	if l.Current() >= 64 {
		t.Fatalf("limit still %d after 5 s of a saturated CPU", l.Current())
	}
}

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
