package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// attemptLog records what a test server saw, in order.
type attemptLog struct {
	mu     sync.Mutex
	at     []time.Time
	bodies []string
	nonces []string
}

func (l *attemptLog) record(r *http.Request) int {
	b, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, time.Now())
	l.bodies = append(l.bodies, string(b))
	l.nonces = append(l.nonces, r.Header.Get(HeaderNonce))
	return len(l.at)
}

func (l *attemptLog) snapshot() (at []time.Time, bodies, nonces []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.at...), append([]string(nil), l.bodies...), append([]string(nil), l.nonces...)
}

// opaqueBody hides the reader's type so http.NewRequest cannot set GetBody.
type opaqueBody struct{ io.Reader }

func TestRetries(t *testing.T) {
	const hangUp = -1 // the server drops the connection: a transport error
	tests := []struct {
		name       string
		method     string
		opt        CallOptions
		statuses   []int // per attempt; the last one repeats
		wantHits   int
		wantStatus int // 0: an error is expected
	}{
		{"GET 503 is tried 3 times", http.MethodGet, CallOptions{}, []int{503}, 3, 503},
		{"GET recovers on the 3rd attempt", http.MethodGet, CallOptions{}, []int{500, 502, 200}, 3, 200},
		{"GET 429 is retried", http.MethodGet, CallOptions{}, []int{429, 200}, 2, 200},
		{"GET 400 is not retried", http.MethodGet, CallOptions{}, []int{400}, 1, 400},
		{"GET transport error is retried", http.MethodGet, CallOptions{}, []int{hangUp}, 3, 0},
		{"PUT is idempotent", http.MethodPut, CallOptions{}, []int{503, 200}, 2, 200},
		{"POST 503 is not retried", http.MethodPost, CallOptions{}, []int{503}, 1, 503},
		{"POST transport error is not retried", http.MethodPost, CallOptions{}, []int{hangUp}, 1, 0},
		{"PATCH is not retried", http.MethodPatch, CallOptions{}, []int{503}, 1, 503},
		{"POST marked idempotent is retried", http.MethodPost, CallOptions{Idempotent: true}, []int{503}, 3, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.RetryWaits = []time.Duration{20 * time.Millisecond, 60 * time.Millisecond}
			c := newClient(t, cfg)
			var log attemptLog
			srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
				n := log.record(r)
				st := tt.statuses[min(n, len(tt.statuses))-1]
				if st == hangUp {
					conn, _, _ := w.(http.Hijacker).Hijack()
					_ = conn.Close()
					return
				}
				w.WriteHeader(st)
				_, _ = fmt.Fprintf(w, "attempt %d", n)
			})

			req, _ := http.NewRequest(tt.method, srv.URL, opaqueBody{strings.NewReader(`{"x":1}`)})
			resp, err := c.Do(context.Background(), req, tt.opt)
			if tt.wantStatus == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("status %d, want a transport error", resp.StatusCode)
				}
			} else {
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tt.wantStatus {
					t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
				}
				// The caller sees the last attempt's reply, body intact.
				if want := fmt.Sprintf("attempt %d", tt.wantHits); string(b) != want {
					t.Errorf("body = %q, want %q", b, want)
				}
			}

			at, bodies, _ := log.snapshot()
			if len(at) != tt.wantHits {
				t.Fatalf("server saw %d attempts, want %d", len(at), tt.wantHits)
			}
			for i, b := range bodies {
				if b != `{"x":1}` {
					t.Errorf("attempt %d body = %q, want the original body replayed", i+1, b)
				}
			}
			// Waits come from the configuration, in order. Only lower bounds
			// are checked: the second wait being three times the first shows
			// they are not swapped or repeated.
			for i := 1; i < len(at); i++ {
				if gap, want := at[i].Sub(at[i-1]), cfg.RetryWaits[i-1]; gap < want {
					t.Errorf("wait before attempt %d = %s, want at least %s", i+1, gap, want)
				}
			}
		})
	}
}

func TestRetryStopsWhenCallerCancels(t *testing.T) {
	cfg := testConfig()
	cfg.RetryWaits = []time.Duration{time.Hour}
	c := newClient(t, cfg)
	srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		_, err := c.Do(ctx, req, CallOptions{})
		errc <- err
	}()
	waitFor(t, "first attempt", func() bool { return srv.hits.Load() == 1 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Do did not return after the caller canceled during a retry wait")
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}

func TestRetryWaitsRepeatLast(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RetryAttempts = 5
	want := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	for failed := 1; failed <= 4; failed++ {
		if got := cfg.retryWait(failed); got != want[failed-1] {
			t.Errorf("wait after %d failures = %s, want %s", failed, got, want[failed-1])
		}
	}
}

// Each attempt is signed afresh: a receiver remembering nonces would
// refuse a retry that repeated the first attempt's nonce.
func TestSignedRetriesUseFreshNonces(t *testing.T) {
	c := newClient(t, testConfig())
	var log attemptLog
	srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		log.record(r)
		w.WriteHeader(503)
	})
	s := &Signer{APIKey: "k", Secret: []byte("s")}
	resp, err := get(t, c, srv.URL, CallOptions{Signer: s})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, _, nonces := log.snapshot()
	seen := map[string]bool{}
	for _, n := range nonces {
		if n == "" || seen[n] {
			t.Fatalf("nonces %q: want 3 distinct non-empty nonces", nonces)
		}
		seen[n] = true
	}
	if len(nonces) != 3 {
		t.Fatalf("attempts = %d, want 3", len(nonces))
	}
}
