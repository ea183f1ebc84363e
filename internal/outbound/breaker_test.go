package outbound

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// breakerFixture is one client (no retries, so one call = one attempt) and
// one server whose reply status the test sets.
type breakerFixture struct {
	t      *testing.T
	c      *Client
	srv    *countingServer
	status atomic.Int64
	dials  atomic.Int64
	host   string

	mu          sync.Mutex
	transitions []string
}

func newBreakerFixture(t *testing.T) *breakerFixture {
	f := &breakerFixture{t: t}
	cfg := testConfig()
	cfg.RetryAttempts = 1
	// failsafe-go's breaker reads the wall clock and takes no injected one;
	// the wait is long enough that a busy machine does not see the breaker
	// half-open before the test has checked that it is open.
	cfg.BreakerOpenWait = 500 * time.Millisecond
	cfg.Dialer = countingDialer(&f.dials)
	f.c = newClient(t, cfg, WithStateListener(func(host, from, to string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.transitions = append(f.transitions, from+">"+to)
	}))
	f.status.Store(http.StatusOK)
	f.srv = newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(f.status.Load()))
	})
	u, _ := url.Parse(f.srv.URL)
	f.host = u.Host
	return f
}

// call makes one GET with the given reply status and returns the error.
func (f *breakerFixture) call(status int) error {
	f.t.Helper()
	f.status.Store(int64(status))
	resp, err := get(f.t, f.c, f.srv.URL, CallOptions{})
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return err
}

func (f *breakerFixture) calls(statuses ...int) {
	f.t.Helper()
	for i, st := range statuses {
		if err := f.call(st); err != nil {
			f.t.Fatalf("call %d (status %d): %v", i+1, st, err)
		}
	}
}

func (f *breakerFixture) wantState(want string) {
	f.t.Helper()
	if got := f.c.BreakerState(f.host); got != want {
		f.t.Fatalf("breaker state = %s, want %s", got, want)
	}
}

// wantRejected checks that a call fails with ErrCircuitOpen without the
// server seeing it and without dialing (idle connections are dropped first,
// so a call let through would have to dial).
func (f *breakerFixture) wantRejected() {
	f.t.Helper()
	f.c.Close()
	hits, dials := f.srv.hits.Load(), f.dials.Load()
	if err := f.call(http.StatusOK); !errors.Is(err, ErrCircuitOpen) {
		f.t.Fatalf("call while open: error = %v, want ErrCircuitOpen", err)
	}
	if f.srv.hits.Load() != hits || f.dials.Load() != dials {
		f.t.Fatalf("call while open reached the host (hits %d→%d, dials %d→%d)", hits, f.srv.hits.Load(), dials, f.dials.Load())
	}
}

// open makes a full window of failing calls: the breaker judges the
// failure rate only once 10 calls were made.
func (f *breakerFixture) open() {
	f.t.Helper()
	f.calls(repeat(500, 9)...)
	f.wantState(StateClosed)
	f.calls(500)
	f.wantState(StateOpen)
}

func (f *breakerFixture) waitHalfOpen() {
	f.t.Helper()
	waitFor(f.t, "breaker to half-open", func() bool { return f.c.BreakerState(f.host) == StateHalfOpen })
}

func repeat(status, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = status
	}
	return s
}

func TestBreaker(t *testing.T) {
	t.Run("opens at 5 failures within the window of 10", func(t *testing.T) {
		t.Parallel()
		f := newBreakerFixture(t)
		f.calls(200, 500, 200, 500, 200, 500, 200, 500, 200)
		f.wantState(StateClosed)
		f.calls(500) // 5 of the last 10
		f.wantState(StateOpen)
		f.wantRejected()
	})

	t.Run("stays closed below the threshold", func(t *testing.T) {
		t.Parallel()
		f := newBreakerFixture(t)
		f.calls(500, 500, 500, 500)
		f.calls(repeat(200, 6)...)
		// The window slides: the oldest failures leave as new failures arrive.
		f.calls(500, 500, 500, 500)
		f.wantState(StateClosed)
	})

	t.Run("429 and 4xx are not failures", func(t *testing.T) {
		t.Parallel()
		f := newBreakerFixture(t)
		f.calls(repeat(429, 6)...)
		f.calls(repeat(404, 6)...)
		f.wantState(StateClosed)
	})

	t.Run("half-open after the wait, closed after 5 good trials", func(t *testing.T) {
		t.Parallel()
		f := newBreakerFixture(t)
		f.open()
		f.wantRejected()
		f.waitHalfOpen()
		f.calls(200, 200, 200, 200)
		f.wantState(StateHalfOpen)
		f.calls(200)
		f.wantState(StateClosed)
		f.mu.Lock()
		defer f.mu.Unlock()
		want := []string{"CLOSED>OPEN", "OPEN>HALF_OPEN", "HALF_OPEN>CLOSED"}
		if !slices.Equal(f.transitions, want) {
			t.Errorf("transitions = %v, want %v", f.transitions, want)
		}
	})

	t.Run("a failed trial reopens", func(t *testing.T) {
		t.Parallel()
		f := newBreakerFixture(t)
		f.open()
		f.waitHalfOpen()
		f.calls(200, 200)
		f.calls(500)
		f.wantState(StateOpen)
		f.wantRejected()
		// And the cycle repeats.
		f.waitHalfOpen()
		f.calls(repeat(200, 5)...)
		f.wantState(StateClosed)
	})

	t.Run("transport errors are failures", func(t *testing.T) {
		t.Parallel()
		f := newBreakerFixture(t)
		f.srv.Close()
		for i := range 10 {
			if err := f.call(200); err == nil || errors.Is(err, ErrCircuitOpen) {
				t.Fatalf("call %d to a closed server: error = %v, want a transport error", i+1, err)
			}
		}
		f.wantState(StateOpen)
	})

	t.Run("breakers are per host", func(t *testing.T) {
		t.Parallel()
		f := newBreakerFixture(t)
		other := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {})
		f.open()
		resp, err := get(t, f.c, other.URL, CallOptions{})
		if err != nil {
			t.Fatalf("call to another host while the first is open: %v", err)
		}
		resp.Body.Close()
		u, _ := url.Parse(other.URL)
		if got := f.c.BreakerState(u.Host); got != StateClosed {
			t.Errorf("other host state = %s, want CLOSED", got)
		}
		states := f.c.BreakerStates()
		if states[f.host] != StateOpen || states[u.Host] != StateClosed {
			t.Errorf("BreakerStates = %v", states)
		}
	})

	t.Run("retries count against the breaker", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig() // 3 attempts per call
		cfg.BreakerOpenWait = time.Minute
		c := newClient(t, cfg)
		srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
		resp, err := get(t, c, srv.URL, CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Calls 2 and 3: attempts 4 to 9 fail, the window is not full yet.
		for range 2 {
			resp, err := get(t, c, srv.URL, CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		// Fourth call: attempt 10 fails, the breaker opens, and the
		// second attempt is refused instead of reaching the host.
		_, err = get(t, c, srv.URL, CallOptions{})
		if !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("error = %v, want ErrCircuitOpen", err)
		}
		if n := srv.hits.Load(); n != 10 {
			t.Errorf("server hits = %d, want 10", n)
		}
	})
}

func TestBreakerThresholdFromRatio(t *testing.T) {
	for _, tt := range []struct {
		window int
		ratio  float64
		want   uint
	}{{10, 0.5, 5}, {10, 0.3, 3}, {10, 0.25, 3}, {10, 1, 10}, {4, 0.01, 1}} {
		t.Run(fmt.Sprint(tt.window, tt.ratio), func(t *testing.T) {
			cfg := Config{BreakerWindow: tt.window, BreakerFailureRatio: tt.ratio}
			if got := cfg.breakerFailures(); got != tt.want {
				t.Errorf("failures = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestBreakerKeyAndClock: calls naming a BreakerKey share that breaker
// whatever their host, and the open wait runs on the injected clock.
func TestBreakerKeyAndClock(t *testing.T) {
	cfg := testConfig()
	cfg.RetryAttempts = 1
	cfg.BreakerOpenWait = 30 * time.Second
	var (
		mu  sync.Mutex
		now = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newClient(t, cfg, WithClock(clock))
	failing := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	healthy := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {})
	call := func(u string, opt CallOptions) (int, error) {
		resp, err := get(t, c, u, opt)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	a := CallOptions{BreakerKey: "endpoint-a"}
	for range 10 {
		if _, err := call(failing.URL, a); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.BreakerState("endpoint-a"); got != StateOpen {
		t.Fatalf("state %s", got)
	}
	if got := c.BreakerRemaining("endpoint-a"); got != 30*time.Second {
		t.Fatalf("remaining %s, want 30s on the injected clock", got)
	}
	// The same host under another key, and the key on another host.
	if _, err := call(failing.URL, CallOptions{BreakerKey: "endpoint-b"}); err != nil {
		t.Fatalf("another key: %v", err)
	}
	if _, err := call(healthy.URL, a); !errors.Is(err, ErrCircuitOpen) || healthy.hits.Load() != 0 {
		t.Fatalf("the open key on another host: %v (hits %d)", err, healthy.hits.Load())
	}
	advance(29 * time.Second)
	if got := c.BreakerRemaining("endpoint-a"); got != time.Second || c.BreakerState("endpoint-a") != StateOpen {
		t.Fatalf("remaining %s, state %s", got, c.BreakerState("endpoint-a"))
	}
	advance(time.Second)
	if got := c.BreakerState("endpoint-a"); got != StateHalfOpen {
		t.Fatalf("after the wait: %s", got)
	}
	for i := range 5 {
		if st, err := call(healthy.URL, a); err != nil || st != 200 {
			t.Fatalf("trial %d: %d %v", i+1, st, err)
		}
	}
	if got := c.BreakerState("endpoint-a"); got != StateClosed {
		t.Fatalf("after 5 good trials: %s", got)
	}
}

// TestBreakerFullWindow: the failure rate is judged over a full window
// of 10 calls only: 5 failures in a row do not open the breaker, the 10th
// call with 5 failures among the last 10 does.
func TestBreakerFullWindow(t *testing.T) {
	f := newBreakerFixture(t)
	cfg := testConfig()
	cfg.RetryAttempts = 1
	cfg.BreakerOpenWait = time.Minute
	f.c = newClient(t, cfg)
	f.calls(500, 500, 500, 500, 500)
	f.wantState(StateClosed)
	f.calls(200, 200, 200, 200)
	f.wantState(StateClosed)
	f.calls(200)
	f.wantState(StateOpen)
	f.wantRejected()
	// After a close the window starts afresh: nine failures are not enough.
	cfg.BreakerOpenWait = 20 * time.Millisecond
	f.c = newClient(t, cfg)
	f.calls(repeat(500, 9)...)
	f.wantState(StateClosed)
	f.calls(500)
	f.wantState(StateOpen)
	f.waitHalfOpen()
	f.calls(repeat(200, 5)...)
	f.wantState(StateClosed)
	f.calls(500, 500, 500, 500, 500, 500, 500, 500, 500)
	f.wantState(StateClosed)
}
