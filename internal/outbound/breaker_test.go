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

func (f *breakerFixture) open() {
	f.t.Helper()
	f.calls(500, 500, 500, 500, 500)
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

	t.Run("NoBreaker calls pass an open breaker and do not count", func(t *testing.T) {
		t.Parallel()
		f := newBreakerFixture(t)
		f.open()
		f.wantRejected()
		f.status.Store(http.StatusInternalServerError)
		for range 3 {
			resp, err := get(f.t, f.c, f.srv.URL, CallOptions{NoBreaker: true})
			if err != nil {
				t.Fatalf("NoBreaker call through an open breaker: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		f.wantState(StateOpen)
		f.wantRejected()
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
		for i := range 5 {
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
		// Second call: attempts 4 and 5 fail, the breaker opens, and the
		// third attempt is refused instead of reaching the host.
		_, err = get(t, c, srv.URL, CallOptions{})
		if !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("error = %v, want ErrCircuitOpen", err)
		}
		if n := srv.hits.Load(); n != 5 {
			t.Errorf("server hits = %d, want 5", n)
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
