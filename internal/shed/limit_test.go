package shed

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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

// TestSheddingEverything: a limit held full and refusing every request
// sheds everything once AllSeconds whole seconds in a row refused at least
// AllShare of AllMinRequests or more; a second with an admitted request
// among a few, or with no request at all, ends it.
func TestSheddingEverything(t *testing.T) {
	l := NewLimit(1, 1, time.Second)
	clock := time.Unix(1_000_000, 0)
	l.now = func() time.Time { return clock }
	refuseFor := func(n int) {
		for range n {
			if l.TryAcquire() {
				t.Fatal("admitted with the limit held")
			}
			l.countRequest("test-all", true)
		}
	}
	if !l.TryAcquire() {
		t.Fatal("limit not free at start")
	}
	for sec := 1; sec <= AllSeconds; sec++ {
		refuseFor(AllMinRequests)
		clock = clock.Add(time.Second)
		sat := l.Saturation("test-all")
		if want := sec == AllSeconds; sat.All != want || sat.Seen != AllMinRequests || sat.Refused != AllMinRequests {
			t.Fatalf("after %d s refusing everything: %+v, want All %v", sec, sat, want)
		}
	}
	if v := testutil.ToFloat64(sheddingAllGauge.WithLabelValues("test-all")); v != 1 {
		t.Fatalf("gatehouse_http_shedding_all %v, want 1", v)
	}
	// 1 admitted of 20: 95 % refused, under AllShare.
	refuseFor(19)
	l.countRequest("test-all", false)
	clock = clock.Add(time.Second)
	if sat := l.Saturation("test-all"); sat.All || sat.Seen != 20 || sat.Refused != 19 {
		t.Fatalf("a second with one request admitted: %+v", sat)
	}
	for range AllSeconds {
		refuseFor(AllMinRequests)
		clock = clock.Add(time.Second)
	}
	if !l.Saturation("test-all").All {
		t.Fatal("not shedding everything again after AllSeconds more")
	}
	clock = clock.Add(2 * time.Second) // a whole second without requests
	if sat := l.Saturation("test-all"); sat.All || sat.Seen != 0 {
		t.Fatalf("after a quiet second: %+v", sat)
	}
	if v := testutil.ToFloat64(sheddingAllGauge.WithLabelValues("test-all")); v != 0 {
		t.Fatalf("gatehouse_http_shedding_all %v after a quiet second, want 0", v)
	}
	// Too few requests to tell: refusing all of 3 a second is no overload.
	for range AllSeconds + 1 {
		refuseFor(3)
		clock = clock.Add(time.Second)
	}
	if l.Saturation("test-all").All {
		t.Fatal("shedding everything on 3 requests a second")
	}
}

// TestNextDrop: the share refused early grows while the queue is past its
// target, faster while it grows, falls while the queue is short, and stays
// within [0, dropMax].
func TestNextDrop(t *testing.T) {
	for _, c := range []struct {
		name           string
		p, q, prev     float64
		wantLo, wantHi float64
	}{
		{"at target, steady: unchanged", 0.3, 1, 1, 0.3, 0.3},
		{"past target: up", 0.3, 3, 3, 0.39, 0.41},
		{"growing: up faster", 0.3, 3, 2, 0.49, 0.51},
		{"no queue: down", 0.3, 0, 0, 0.24, 0.26},
		{"never below 0", 0.01, 0, 2, 0, 0},
		{"a long stall: up by dropUp at most", 0.3, 40, 0, 0.3 + dropUp, 0.3 + dropUp},
		{"after a stall: down by dropDown at most", 0.5, 1, 40, 0.5 - dropDown, 0.5 - dropDown},
		{"never above dropMax", 0.9, 20, 20, dropMax, dropMax},
	} {
		if got := nextDrop(c.p, c.q, c.prev); got < c.wantLo || got > c.wantHi {
			t.Errorf("%s: nextDrop(%v, %v, %v) = %v, want in [%v, %v]", c.name, c.p, c.q, c.prev, got, c.wantLo, c.wantHi)
		}
	}
}

// TestDropperFollowsTheQueue: a window whose many requests waited three
// times the target raises the share refused early, and refusals follow
// it; many requests waiting less than the target lower it a step; a few
// requests waiting long (closed-loop clients on a slow CPU) raise
// nothing; a window long past forgets it.
func TestDropperFollowsTheQueue(t *testing.T) {
	const target, window = 10 * time.Millisecond, 100 * time.Millisecond
	var d dropper
	for range 1000 {
		d.observe(3*target, 1)
	}
	d.revise(target, window, false)
	for range 1000 { // a second such window
		d.observe(3*target, 1)
	}
	d.revise(target, window, false)
	if p := d.share(); p < 0.3 {
		t.Fatalf("share %v after two windows of 1,000 requests waiting 3 targets", p)
	}
	dropped := 0
	for range 1000 {
		if d.drop() {
			dropped++
		}
	}
	if dropped < 200 || dropped > 900 {
		t.Fatalf("%d of 1,000 dropped at share %v", dropped, d.share())
	}
	// Many requests still waiting, if less than the target: a step down.
	before := d.share()
	for range 1000 {
		d.observe(target/2, 1)
	}
	d.revise(target, window, false)
	if p := d.share(); p < before-dropDown-1e-9 || p >= before {
		t.Fatalf("share %v after a window of 1,000 requests waiting half the target (was %v)", p, before)
	}
	d.revise(target, window, true)
	if d.share() != 0 || d.drop() {
		t.Fatalf("share %v after an idle gap", d.share())
	}
	for range 10 {
		d.observe(3*target, 1)
	}
	d.revise(target, window, false)
	if p := d.share(); p != 0 {
		t.Fatalf("share %v after 10 slow requests (a queue of %v)", p, 10*3*target/window)
	}
}

// TestSampledWaitsStandForTheirShare: a window read from one request in
// SampleEvery counts as many requests waiting at once as the same window
// read from every request, and has the same mean wait.
func TestSampledWaitsStandForTheirShare(t *testing.T) {
	const target, window = 10 * time.Millisecond, 100 * time.Millisecond
	var all, sampled dropper
	for range 1000 {
		all.observe(3*target, 1)
	}
	for range 1000 / SampleEvery {
		sampled.observe(3*target, SampleEvery)
	}
	all.revise(target, window, false)
	sampled.revise(target, window, false)
	if a, s := all.waiting(), sampled.waiting(); a < dropMinQueue || s != a {
		t.Fatalf("requests waiting at once: %v read from a sample, %v from all", s, a)
	}
	if a, s := all.share(), sampled.share(); s != a {
		t.Fatalf("share refused early: %v from a sample, %v from all", s, a)
	}
}
