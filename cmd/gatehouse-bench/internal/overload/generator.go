package overload

import (
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
}

// RunLoad is the load generator of the overload phases, run as a
// child process (`gatehouse-bench overload-load …`) pinned to its own
// CPU: closed-loop (-workers requests at a time, for capacity) or
// open-loop (-rate requests per second on a fixed schedule, whatever the
// answers, with latency counted from each request's scheduled time so a
// stalled server is not hidden). It prints a Result as JSON.
func RunLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("overload-load", flag.ContinueOnError)
	target := fs.String("url", "", "the URL to GET; with -app-key, signed anew for each request (one nonce each, all signed before the clock starts)")
	appKey := fs.String("app-key", "", "sign the URL with this app key")
	appSecret := fs.String("app-secret", "", "and this secret")
	mode := fs.String("mode", "closed", "closed or open")
	workers := fs.Int("workers", 16, "closed: requests at a time")
	rate := fs.Float64("rate", 0, "open: requests per second")
	warmup := fs.Duration("warmup", time.Second, "closed: unmeasured load first")
	duration := fs.Duration("duration", 3*time.Second, "measured period")
	timeout := fs.Duration("timeout", 10*time.Second, "the client's timeout per request")
	maxRate := fs.Float64("max-rate", 60000, "closed, signed: the highest rate to pre-sign for")
	if err := fs.Parse(args); err != nil {
		return err
	}
	n := int(*rate*duration.Seconds()*1.02) + 100
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
	c := newRawClient(tu.Host)
	var res Result
	switch *mode {
	case "closed":
		res = closedLoop(ctx, c, next, *workers, *warmup, *duration, *timeout)
	case "open":
		if *rate <= 0 {
			return errors.New("-rate must be positive")
		}
		res = openLoop(ctx, c, next, *rate, *duration, *timeout)
	default:
		return fmt.Errorf("unknown -mode %q", *mode)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// overloadTargets returns the URL source: the same URL each time, or n
// URLs signed before any is sent (nil once they run out).
func overloadTargets(target, appKey, secret string, n int) (func() string, error) {
	if appKey == "" {
		return func() string { return target }, nil
	}
	s := partnerclient.Signer{AppKey: appKey, AppSecret: secret}
	list := make([]string, n)
	for i := range list {
		u, err := s.SignURL(target)
		if err != nil {
			return nil, err
		}
		list[i] = u
	}
	var i atomic.Int64
	return func() string {
		k := int(i.Add(1)) - 1
		if k >= len(list) {
			return ""
		}
		return list[k]
	}, nil
}

// tally gathers answers.
type tally struct {
	mu       sync.Mutex
	res      Result
	ok, refd []time.Duration
	lag      []time.Duration
}

// do sends one GET of u, counting its answer with the latency from at.
func (t *tally) do(ctx context.Context, c *rawClient, u string, at time.Time, timeout time.Duration) {
	pu, perr := url.Parse(u)
	sentLate := time.Since(at)
	var status int
	var body []byte
	err := perr
	if err == nil {
		status, body, err = c.get(pu, time.Now().Add(timeout))
	}
	lat := time.Since(at)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.res.Sent++
	t.lag = append(t.lag, sentLate)
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
		(strings.Contains(string(body), `"code":6000`) || strings.Contains(string(body), `"code":429`) || strings.Contains(string(body), `"error":`)):
		t.res.Refused++
		t.refd = append(t.refd, lat)
	default:
		t.res.Other++
		if t.res.FirstOther == "" {
			t.res.FirstOther = fmt.Sprintf("HTTP %d: %.200s", status, strings.TrimSpace(string(body)))
		}
	}
}

func (t *tally) summary(period time.Duration) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.res
	r.Seconds = period.Seconds()
	r.OKPerSec = float64(r.OK) / period.Seconds()
	r.P50OKMs, r.P99OKMs, r.P99RefMs = quantileMs(t.ok, 0.5), quantileMs(t.ok, 0.99), quantileMs(t.refd, 0.99)
	r.LagP99Ms = quantileMs(t.lag, 0.99)
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

// closedLoop keeps workers requests in flight: after an unmeasured
// warm-up, it counts what answered in duration.
func closedLoop(ctx context.Context, c *rawClient, next func() string, workers int, warmup, duration, timeout time.Duration) Result {
	run := func(d time.Duration) *tally {
		t := &tally{}
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for time.Now().Before(end) && ctx.Err() == nil {
					u := next()
					if u == "" {
						return
					}
					t.do(ctx, c, u, time.Now(), timeout)
				}
			})
		}
		wg.Wait()
		return t
	}
	run(warmup)
	start := time.Now()
	t := run(duration)
	return t.summary(time.Since(start))
}

// openLoop sends rate requests per second for duration on a fixed
// schedule, each in its own goroutine, then waits for the last answers.
func openLoop(ctx context.Context, c *rawClient, next func() string, rate float64, duration, timeout time.Duration) Result {
	t := &tally{}
	var wg sync.WaitGroup
	start := time.Now()
	total := int(rate * duration.Seconds())
	for sent := 0; sent < total && ctx.Err() == nil; {
		due := min(total, int(time.Since(start).Seconds()*rate)+1)
		for ; sent < due; sent++ {
			u := next()
			if u == "" {
				total = sent
				break
			}
			at := start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
			wg.Go(func() { t.do(ctx, c, u, at, timeout) })
		}
		time.Sleep(200 * time.Microsecond)
	}
	wg.Wait()
	return t.summary(duration)
}
