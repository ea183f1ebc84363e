package overload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/rest/partnerclient"
)

// Result is what one run of the overload load generator saw.
type Result struct {
	Sent int `json:"sent"`
	// OK are the 2xx answers; Refused the 503 and 429 answers in an error
	// body (the partner envelope or {"error": …}); Other anything else.
	OK      int `json:"ok"`
	Refused int `json:"refused"`
	Other   int `json:"other"`
	// Timeouts had no answer within the client's timeout; ConnErrors
	// failed to connect or lost the connection.
	Timeouts   int     `json:"timeouts"`
	ConnErrors int     `json:"conn_errors"`
	Seconds    float64 `json:"seconds"` // the measured (offered) period
	OKPerSec   float64 `json:"ok_per_sec"`
	P50OKMs    float64 `json:"p50_ok_ms"`
	P99OKMs    float64 `json:"p99_ok_ms"`
	P99RefMs   float64 `json:"p99_refused_ms"`
	FirstOther string  `json:"first_other,omitempty"`
	// LagP99Ms is the 99th percentile of how late the generator sent a
	// request after its scheduled time (open loop): well above a
	// millisecond, the generator's own CPU was short and the latencies
	// (counted from the schedule) are partly its own.
	LagP99Ms float64 `json:"generator_lag_p99_ms"`
	// Conns is the number of connections the generator used (open loop:
	// its clients; a request finding them all busy waits for one, and its
	// wait counts in its latency).
	Conns int `json:"conns"`
	// QueuedP99Ms is the 99th percentile of how long an open-loop request
	// waited for a free connection after its scheduled time (0: there was
	// always one).
	QueuedP99Ms float64 `json:"queued_p99_ms"`
	// CPU is how busy the CPUs were during the open loop (with -server-pid).
	CPU *CPUShares `json:"cpu,omitempty"`
}

// RunLoad is the load generator of the overload phases, run as a
// child process (`gatehouse-bench overload-load …`) pinned to its own
// CPU: closed-loop (-workers requests at a time, for capacity) or
// open-loop (-rate requests per second on a fixed schedule, whatever the
// answers, with latency counted from each request's scheduled time so a
// stalled server is not hidden). It prints a Result as JSON.
//
// The open loop is that of wrk2: -conns clients, each with one keep-alive
// connection and one request at a time, take the scheduled requests in
// turn; a request due while every client waits on an answer is sent by
// the first one free, and its latency still counts from its scheduled
// time (no coordinated omission), so a server that falls behind shows in
// the latencies and timeouts as it would to a fleet of clients. A fixed
// set of connections is what a fleet behind a load balancer presents (and
// what a generator on one core can drive at 30,000 requests a second:
// one goroutine and a new connection per late request cost it more CPU
// than the server it measures).
func RunLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("overload-load", flag.ContinueOnError)
	target := fs.String("url", "", "the URL to GET; with -app-key, signed anew for each request (one nonce each, all signed before the clock starts)")
	appKey := fs.String("app-key", "", "sign the URL with this app key")
	appSecret := fs.String("app-secret", "", "and this secret")
	mode := fs.String("mode", "closed", "closed or open")
	workers := fs.Int("workers", 16, "closed: requests at a time")
	conns := fs.Int("conns", 1024, "open: the clients (one connection each)")
	rate := fs.Float64("rate", 0, "open: requests per second")
	warmup := fs.Duration("warmup", time.Second, "closed: unmeasured load first")
	duration := fs.Duration("duration", 3*time.Second, "measured period")
	timeout := fs.Duration("timeout", 10*time.Second, "the client's timeout per request")
	serverPid := fs.Int("server-pid", 0, "open: the server's pid, to report its CPU share")
	maxRate := fs.Float64("max-rate", 60000, "closed, signed: the highest rate to pre-sign for")
	if err := fs.Parse(args); err != nil {
		return err
	}
	n := int(*rate*duration.Seconds()) + 100
	if *mode == "closed" {
		n = int(*maxRate * (*warmup + *duration).Seconds())
	}
	next, err := overloadTargets(*target, *appKey, *appSecret, n)
	if err != nil {
		return err
	}
	tu, err := url.Parse(*target)
	if err != nil || tu.Scheme != "http" {
		return fmt.Errorf("-url %q: an http:// URL is needed", *target)
	}
	var res Result
	switch *mode {
	case "closed":
		res = closedLoop(ctx, tu.Host, next, *workers, *warmup, *duration, *timeout)
	case "open":
		if *rate <= 0 || *conns <= 0 {
			return errors.New("-rate and -conns must be positive")
		}
		cpu := startCPU(*serverPid)
		res = openLoop(ctx, tu.Host, next, *rate, *conns, *duration, *timeout)
		if *serverPid > 0 {
			res.CPU = cpu.shares()
		}
	default:
		return fmt.Errorf("unknown -mode %q", *mode)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// overloadTargets returns the request source: request i's bytes (the
// same GET each time, or n GETs signed before any is sent: nil past them).
func overloadTargets(target, appKey, secret string, n int) (func(i int) []byte, error) {
	if appKey == "" {
		req, err := buildRequest(target)
		if err != nil {
			return nil, err
		}
		return func(int) []byte { return req }, nil
	}
	s := partnerclient.Signer{AppKey: appKey, AppSecret: secret}
	list := make([][]byte, n)
	for i := range list {
		u, err := s.SignURL(target)
		if err != nil {
			return nil, err
		}
		if list[i], err = buildRequest(u); err != nil {
			return nil, err
		}
	}
	return func(i int) []byte {
		if i >= len(list) {
			return nil
		}
		return list[i]
	}, nil
}

// client is one simulated client: its connection and what it saw (merged
// at the end, so that recording takes no lock).
type client struct {
	conn   rawConn
	res    Result
	ok     []time.Duration
	refd   []time.Duration
	lag    []time.Duration
	queued []time.Duration
}

// do sends request req, due at at, and counts its answer with the
// latency from at; the client gives up at at + timeout.
func (t *client) do(req []byte, at time.Time, timeout time.Duration) {
	t.res.Sent++
	deadline := at.Add(timeout)
	if !time.Now().Before(deadline) {
		t.res.Timeouts++ // its client gave up before a connection was free
		return
	}
	status, err := t.conn.do(req, deadline)
	lat := time.Since(at)
	body := t.conn.body
	switch {
	case errors.Is(err, errTimeout):
		t.res.Timeouts++
	case err != nil:
		t.res.ConnErrors++
		if t.res.FirstOther == "" {
			t.res.FirstOther = err.Error()
		}
	case status/100 == 2:
		t.res.OK++
		t.ok = append(t.ok, lat)
	case (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) &&
		(bytes.Contains(body, []byte(`"code":6000`)) || bytes.Contains(body, []byte(`"code":429`)) || bytes.Contains(body, []byte(`"error":`))):
		t.res.Refused++
		t.refd = append(t.refd, lat)
	default:
		t.res.Other++
		if t.res.FirstOther == "" {
			t.res.FirstOther = fmt.Sprintf("HTTP %d: %.200s", status, strings.TrimSpace(string(body)))
		}
	}
}

// summary merges the clients' figures over period.
func summary(clients []*client, period time.Duration) Result {
	var r Result
	var ok, refd, lag, queued []time.Duration
	for _, c := range clients {
		r.Sent += c.res.Sent
		r.OK += c.res.OK
		r.Refused += c.res.Refused
		r.Other += c.res.Other
		r.Timeouts += c.res.Timeouts
		r.ConnErrors += c.res.ConnErrors
		if r.FirstOther == "" {
			r.FirstOther = c.res.FirstOther
		}
		ok, refd = append(ok, c.ok...), append(refd, c.refd...)
		lag, queued = append(lag, c.lag...), append(queued, c.queued...)
	}
	r.Seconds = period.Seconds()
	r.OKPerSec = float64(r.OK) / period.Seconds()
	r.P50OKMs, r.P99OKMs, r.P99RefMs = quantileMs(ok, 0.5), quantileMs(ok, 0.99), quantileMs(refd, 0.99)
	r.LagP99Ms, r.QueuedP99Ms = quantileMs(lag, 0.99), quantileMs(queued, 0.99)
	r.Conns = len(clients)
	return r
}

func quantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return ms(d[min(len(d)-1, int(float64(len(d))*q))])
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// newClients returns n clients of addr, each with its connection open
// (dialled before any clock starts).
func newClients(addr string, n int, timeout time.Duration) []*client {
	cs := make([]*client, n)
	for i := range cs {
		cs[i] = &client{conn: rawConn{addr: addr}}
		_ = cs[i].conn.dial(time.Now().Add(timeout)) // a failure is the first request's
	}
	return cs
}

// closedLoop keeps workers requests in flight: after an unmeasured
// warm-up, it counts what answered in duration.
func closedLoop(ctx context.Context, addr string, next func(int) []byte, workers int, warmup, duration, timeout time.Duration) Result {
	var seq atomic.Int64
	run := func(d time.Duration) []*client {
		clients := newClients(addr, workers, timeout)
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				defer c.conn.close()
				for time.Now().Before(end) && ctx.Err() == nil {
					req := next(int(seq.Add(1) - 1))
					if req == nil {
						return
					}
					c.do(req, time.Now(), timeout)
				}
			})
		}
		wg.Wait()
		return clients
	}
	run(warmup)
	start := time.Now()
	clients := run(duration)
	return summary(clients, time.Since(start))
}

// openLoop sends rate requests per second for duration on a fixed
// schedule through conns clients (see RunLoad), then waits for the last
// answers.
func openLoop(ctx context.Context, addr string, next func(int) []byte, rate float64, conns int, duration, timeout time.Duration) Result {
	clients := newClients(addr, conns, timeout)
	total := int(rate * duration.Seconds())
	var seq atomic.Int64
	start := time.Now().Add(20 * time.Millisecond)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			defer c.conn.close()
			for ctx.Err() == nil {
				i := int(seq.Add(1) - 1)
				req := next(i)
				if i >= total || req == nil {
					return
				}
				at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
				if wait := time.Until(at); wait > 0 {
					// Free before its time: how late it wakes is the
					// generator's own lag (its CPU, its timers).
					time.Sleep(wait)
					c.lag = append(c.lag, time.Since(at))
				} else {
					// Due while this client was busy: it waited for a
					// connection, as a fleet's request waits for a client.
					c.queued = append(c.queued, -wait)
				}
				c.do(req, at, timeout)
			}
		})
	}
	wg.Wait()
	return summary(clients, duration)
}
