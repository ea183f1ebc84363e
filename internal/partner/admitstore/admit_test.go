package admitstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/errs"

	"github.com/redis/go-redis/v9"
)

func TestAdmitDuplicateNonce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		req := AdmitRequest{App: "app1", Nonce: "n1", NonceTTL: 5 * time.Minute, Verified: true, Limit: 10, Window: time.Second}

		a := mustAdmit(t, s, req)
		if a.DuplicateNonce || a.Limited || a.Limit != 10 || a.Remaining != 9 {
			t.Fatalf("first use: got %+v, want admitted with 9 remaining", a)
		}
		a = mustAdmit(t, s, req)
		if !a.DuplicateNonce || a.Limited {
			t.Fatalf("second use: got %+v, want duplicate", a)
		}
		unverified := req
		unverified.Verified = false
		if a := mustAdmit(t, s, unverified); !a.DuplicateNonce {
			t.Fatalf("unverified repeat: got %+v, want duplicate", a)
		}
		other := req
		other.App = "app2"
		if a := mustAdmit(t, s, other); a.DuplicateNonce || a.Limited {
			t.Fatalf("same nonce, other app: got %+v, want admitted", a)
		}
		if n := liveCount(t, s, "app1", time.Second); n != 1 {
			t.Fatalf("app1 counted %d requests, want 1 (a duplicate is not counted)", n)
		}
	})
}

func TestAdmitUnverifiedRecordsNothing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		req := AdmitRequest{App: "app", Nonce: "n1", NonceTTL: 5 * time.Minute, Limit: 1, Window: time.Minute}
		for i := range 3 {
			if a := mustAdmit(t, s, req); a.DuplicateNonce || a.Limited {
				t.Fatalf("unverified call %d: got %+v, want neither duplicate nor limited", i, a)
			}
		}
		if n := liveCount(t, s, "app", time.Minute); n != 0 {
			t.Fatalf("unverified calls counted %d times, want 0", n)
		}
		// The nonce was not recorded and the single slot is still free.
		req.Verified = true
		if a := mustAdmit(t, s, req); a.DuplicateNonce || a.Limited || a.Remaining != 0 {
			t.Fatalf("verified call: got %+v, want admitted with 0 remaining", a)
		}
	})
}

func TestAdmitNonceExpiry(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		const ttl = 500 * time.Millisecond
		req := AdmitRequest{App: "app", Nonce: "n1", NonceTTL: ttl, Verified: true, Limit: 100, Window: time.Second}
		mustAdmit(t, s, req)
		probe := req
		probe.Verified = false // probing must not record the nonce again
		if a := mustAdmit(t, s, probe); !a.DuplicateNonce {
			t.Fatalf("right after use: got %+v, want duplicate", a)
		}
		wait := ttl
		if b.Clock != nil {
			b.Clock.Advance(ttl - time.Nanosecond)
			if a := mustAdmit(t, s, probe); !a.DuplicateNonce {
				t.Fatalf("1ns before expiry: got %+v, want duplicate", a)
			}
			wait = time.Nanosecond
		}
		b.Await(t, wait, "nonce expires", func() bool { return !mustAdmit(t, s, probe).DuplicateNonce })
		if a := mustAdmit(t, s, req); a.DuplicateNonce || a.Limited {
			t.Fatalf("reuse after expiry: got %+v, want admitted", a)
		}
	})
}

func TestAdmitExactLimit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		const limit, window = 5, time.Second
		seq := 0
		admit := func() Admission {
			seq++
			return mustAdmit(t, s, AdmitRequest{App: "app", Nonce: "n" + strconv.Itoa(seq), NonceTTL: time.Minute, Verified: true, Limit: limit, Window: window})
		}
		burst := func(round string) {
			for i := range limit {
				if a := admit(); a.Limited || a.DuplicateNonce || a.Remaining != limit-1-i || a.Limit != limit {
					t.Fatalf("%s: request %d: got %+v, want admitted with %d remaining", round, i+1, a, limit-1-i)
				}
			}
			for i := range 3 {
				if a := admit(); !a.Limited || a.Remaining != 0 || a.RetryAfter <= 0 || a.RetryAfter > window {
					t.Fatalf("%s: request %d over the limit: got %+v, want limited with 0 < RetryAfter <= %v", round, limit+1+i, a, window)
				}
			}
			// Refused requests are not counted...
			if n := liveCount(t, s, "app", window); n != limit {
				t.Fatalf("%s: %d requests counted, want %d", round, n, limit)
			}
		}
		burst("first window")
		// ...but their nonces were recorded: they were verified requests.
		if a := mustAdmit(t, s, AdmitRequest{App: "app", Nonce: "n" + strconv.Itoa(seq), NonceTTL: time.Minute, Limit: limit, Window: window}); !a.DuplicateNonce {
			t.Fatalf("nonce of a refused request: got %+v, want duplicate", a)
		}
		// So once the window has passed, exactly Limit are admitted again.
		b.Await(t, window, "window empties", func() bool { return liveCount(t, s, "app", window) == 0 })
		burst("second window")
	})
}

func TestAdmitRemainingAndRetryAfter(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		const limit, window, gap = 3, time.Second, 100 * time.Millisecond
		seq := 0
		admit := func() (Admission, time.Time, time.Time) {
			seq++
			before := b.Now()
			a := mustAdmit(t, s, AdmitRequest{App: "app", Nonce: "n" + strconv.Itoa(seq), NonceTTL: time.Minute, Verified: true, Limit: limit, Window: window})
			return a, before, b.Now()
		}
		first, firstBefore, firstAfter := admit()
		if first.Remaining != 2 {
			t.Fatalf("first: got %+v, want 2 remaining", first)
		}
		for want := 1; want >= 0; want-- {
			b.Step(gap)
			if a, _, _ := admit(); a.Limited || a.Remaining != want {
				t.Fatalf("got %+v, want admitted with %d remaining", a, want)
			}
		}
		b.Step(gap)
		a, before, after := admit()
		if !a.Limited || a.Remaining != 0 {
			t.Fatalf("over the limit: got %+v, want limited", a)
		}
		// RetryAfter is when the first admission leaves the window: its
		// server time lies within [firstBefore, firstAfter] and the refusal's
		// within [before, after]. With the fake clock the bounds coincide:
		// 1s - 3 gaps = 700ms exactly.
		const slack = time.Millisecond // Redis TIME has microsecond resolution
		lo := firstBefore.Add(window).Sub(after) - slack
		hi := firstAfter.Add(window).Sub(before) + slack
		if a.RetryAfter < lo || a.RetryAfter > hi {
			t.Fatalf("RetryAfter = %v, want within [%v, %v]", a.RetryAfter, lo, hi)
		}
		if b.Clock != nil && a.RetryAfter != window-3*gap {
			t.Fatalf("RetryAfter = %v, want exactly %v", a.RetryAfter, window-3*gap)
		}
		// It is honest: once it has passed, one slot is free again.
		b.Await(t, a.RetryAfter, "oldest request leaves the window", func() bool {
			return liveCount(t, s, "app", window) < limit
		})
		if a, _, _ := admit(); a.Limited {
			t.Fatalf("after RetryAfter: got %+v, want admitted", a)
		}
	})
}

// TestAdmitLoweredLimit covers an admin lowering an app's rate limit while
// its window is full: nothing is admitted until enough requests have left.
func TestAdmitLoweredLimit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		const window = time.Minute
		req := func(i, limit int) AdmitRequest {
			return AdmitRequest{App: "app", Nonce: "n" + strconv.Itoa(i), NonceTTL: time.Minute, Verified: true, Limit: limit, Window: window}
		}
		for i := range 4 {
			b.Step(time.Second)
			mustAdmit(t, s, req(i, 4))
		}
		// 4 counted, limit now 2: the 3rd oldest must leave before a slot frees.
		a := mustAdmit(t, s, req(10, 2))
		if !a.Limited || a.Remaining != 0 || a.Limit != 2 {
			t.Fatalf("got %+v, want limited at limit 2", a)
		}
		if b.Clock != nil && a.RetryAfter != window-time.Second {
			t.Fatalf("RetryAfter = %v, want %v (the 3rd oldest leaves after the 1st and 2nd)", a.RetryAfter, window-time.Second)
		}
		if a.RetryAfter <= 0 || a.RetryAfter > window {
			t.Fatalf("RetryAfter = %v, want within (0, %v]", a.RetryAfter, window)
		}
	})
}

func TestAdmitConcurrentLimit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		const goroutines, limit = 200, 50
		var admitted, limited atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, goroutines)
		for i := range goroutines {
			wg.Go(func() {
				<-start
				a, err := s.Admit(context.Background(), AdmitRequest{
					App: "app", Nonce: "n" + strconv.Itoa(i), NonceTTL: time.Minute,
					Verified: true, Limit: limit, Window: time.Minute,
				})
				switch {
				case err != nil:
					errs <- err
				case a.Limited:
					limited.Add(1)
				default:
					admitted.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Admit: %v", err)
		}
		if admitted.Load() != limit || limited.Load() != goroutines-limit {
			t.Fatalf("admitted %d, limited %d; want %d and %d", admitted.Load(), limited.Load(), limit, goroutines-limit)
		}
		if n := liveCount(t, s, "app", time.Minute); n != limit {
			t.Fatalf("%d counted, want %d", n, limit)
		}
	})
}

func TestAdmitConcurrentSameNonce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		const goroutines = 100
		var winners, duplicates atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Go(func() {
				<-start
				a, err := s.Admit(context.Background(), AdmitRequest{
					App: "app", Nonce: "same", NonceTTL: time.Minute,
					Verified: true, Limit: 1000, Window: time.Second,
				})
				switch {
				case err != nil:
					errs <- err
				case a.DuplicateNonce:
					duplicates.Add(1)
				default:
					winners.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Admit: %v", err)
		}
		if winners.Load() != 1 || duplicates.Load() != goroutines-1 {
			t.Fatalf("%d winners, %d duplicates; want 1 and %d", winners.Load(), duplicates.Load(), goroutines-1)
		}
		if n := liveCount(t, s, "app", time.Second); n != 1 {
			t.Fatalf("%d counted, want 1", n)
		}
	})
}

func TestAdmitRejectsInvalidRequests(t *testing.T) {
	t.Parallel()
	valid := AdmitRequest{App: "app", Nonce: "n", NonceTTL: time.Minute, Verified: true, Limit: 1, Window: time.Second}
	tests := []struct {
		name   string
		change func(r *AdmitRequest)
	}{
		{"empty app", func(r *AdmitRequest) { r.App = "" }},
		{"empty nonce", func(r *AdmitRequest) { r.Nonce = "" }},
		{"nonce TTL below 1ms", func(r *AdmitRequest) { r.NonceTTL = time.Microsecond }},
		{"limit 0", func(r *AdmitRequest) { r.Limit = 0 }},
		{"window 0", func(r *AdmitRequest) { r.Window = 0 }},
	}
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		for _, tt := range tests {
			r := valid
			tt.change(&r)
			_, err := s.Admit(context.Background(), r)
			if err == nil || errors.Is(err, errs.Unavailable) {
				t.Errorf("%s: got error %v, want a validation error", tt.name, err)
			}
		}
		// Limit and Window do not matter to an unverified check.
		r := valid
		r.Verified, r.Limit, r.Window = false, 0, 0
		if _, err := s.Admit(context.Background(), r); err != nil {
			t.Errorf("unverified without limit: %v", err)
		}
	})
}

// countingHook counts the commands and pipelines a Redis client sends,
// except those Redis answered NOSCRIPT: the shared test Redis may lose its
// scripts at any moment (another test's SCRIPT FLUSH), and the EVAL that
// follows is then the one round trip that counts.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			h.n.Add(1)
		}
		return err
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if !redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				h.n.Add(1)
				break
			}
		}
		return err
	}
}

// TestAdmitOneRoundTrip checks that the Redis gate costs one command per
// request, whatever the outcome, once the script is in the server's cache.
func TestAdmitOneRoundTrip(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		r, ok := s.(*redisStore)
		if !ok {
			return // the memory store has no round trips
		}
		c := r.c
		req := AdmitRequest{App: "app", Nonce: "warm-up", NonceTTL: time.Minute, Verified: true, Limit: 2, Window: time.Minute}
		mustAdmit(t, s, req) // may load the script (EVALSHA, then EVAL)
		h := &countingHook{}
		c.AddHook(h)
		calls := []AdmitRequest{req} // duplicate
		for i := range 3 {           // admitted, then limited twice
			r := req
			r.Nonce = "n" + strconv.Itoa(i)
			calls = append(calls, r)
		}
		unverified := req
		unverified.Verified, unverified.Nonce = false, "fresh"
		calls = append(calls, unverified)
		for _, r := range calls {
			mustAdmit(t, s, r)
		}
		if got := h.n.Load(); got != int64(len(calls)) {
			t.Fatalf("%d Admit calls sent %d commands, want one each", len(calls), got)
		}
	})
}
