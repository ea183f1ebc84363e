// Package sink holds the receivers the harness serves itself, on
// loopback: the webhook sink of the webhook phases and the discarding
// OTLP/HTTP collector of the traced phases.
package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sink is the webhook receiver of the webhook phases, in the harness
// process, on loopback:
//
//	/ok     answers 204 and records the arrival (drain and floors);
//	/hang   holds the request until the client gives up or release;
//	/probe  answers 204 and records the event → first attempt delay of the
//	        message (its createTime, in ms).
type Sink struct {
	Base string
	srv  *http.Server

	mu       sync.Mutex
	arrivals []time.Time
	delays   []time.Duration
	hold     chan struct{}
	released bool
	// Hanging counts the /hang requests held now, Probes the /probe
	// arrivals recorded.
	Hanging atomic.Int64
	Probes  atomic.Int64
}

// Start serves a Sink on a free loopback port.
func Start() (*Sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{Base: "http://" + l.Addr().String(), hold: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		now := time.Now()
		s.mu.Lock()
		s.arrivals = append(s.arrivals, now)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		s.Hanging.Add(1)
		defer s.Hanging.Add(-1)
		s.mu.Lock()
		hold := s.hold
		s.mu.Unlock()
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/probe", func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var m struct {
			CreateTime int64 `json:"createTime"`
			RetryCount int   `json:"retryCount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err == nil && m.RetryCount == 0 {
			s.mu.Lock()
			s.delays = append(s.delays, now.Sub(time.UnixMilli(m.CreateTime)))
			s.mu.Unlock()
			s.Probes.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(l) //nolint:errcheck // closed by close
	return s, nil
}

// Reset forgets the arrivals and delays recorded so far and holds /hang
// requests again.
func (s *Sink) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals, s.delays = nil, nil
	if s.released {
		s.hold, s.released = make(chan struct{}), false
	}
}

// Release lets every held /hang request go.
func (s *Sink) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		close(s.hold)
		s.released = true
	}
}

// WaitArrivals waits until n requests reached /ok and returns the rate
// between the first and the last (deliveries per second).
func (s *Sink) WaitArrivals(ctx context.Context, n int, within time.Duration) (float64, error) {
	deadline := time.Now().Add(within)
	for {
		s.mu.Lock()
		got := len(s.arrivals)
		var first, last time.Time
		if got >= n {
			first, last = s.arrivals[0], s.arrivals[n-1]
		}
		s.mu.Unlock()
		if got >= n {
			return float64(n-1) / last.Sub(first).Seconds(), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("only %d of %d deliveries arrived within %s", got, n, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitFor polls cond until it holds or within passes.
func WaitFor(ctx context.Context, within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// ProbeDelays returns the recorded event → first attempt delays, sorted.
func (s *Sink) ProbeDelays() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := slices.Clone(s.delays)
	slices.Sort(d)
	return d
}

// Close releases every held request and stops the Sink.
func (s *Sink) Close() {
	s.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// Percentile is the p-quantile of sorted durations, in ms.
func Percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
}
