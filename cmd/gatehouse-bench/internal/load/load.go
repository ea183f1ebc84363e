// Package load drives closed-loop HTTP load from the harness process:
// sources of requests, phases measured alone or in turns with their
// floor, and what each cost the servers it loaded and the machine.
package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/proc"
)

// Result is one measured load phase.
type Result struct {
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	RPS        float64 `json:"rps"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	FirstError string  `json:"first_error,omitempty"`
	// ServerCPUus is the CPU time the loaded server process(es) used in
	// the measured phase per successful request, in microseconds: what
	// each request costs the server itself, which other work on a shared
	// machine disturbs far less than throughput. Databases, Redis and
	// the load generator are not in it. 0 when it could not be read.
	ServerCPUus float64 `json:"server_cpu_us_per_request,omitempty"`
	// MachineCPUus is the whole machine's busy CPU time (every process:
	// the server, Postgres, Redis, the load generator; /proc/stat) in the
	// measured phase per successful request, in microseconds. On a machine
	// whose cores are all in use, throughput follows it. 0 when unknown.
	MachineCPUus float64 `json:"machine_cpu_us_per_request,omitempty"`
}

// Source hands out the requests of a phase: Next returns false when it
// has none left (pre-signed URLs are finite).
type Source struct {
	Next func() (*http.Request, bool)
	Want int // the expected status
}

// URLs is a Source of GET requests from a fixed list (each used once).
func URLs(list []string) Source { return URLsWith(http.MethodGet, list) }

// URLsWith is a Source of requests with method from a fixed list (each
// used once), expecting 200.
func URLsWith(method string, list []string) Source {
	var i atomic.Int64
	return Source{Want: http.StatusOK, Next: func() (*http.Request, bool) {
		n := int(i.Add(1)) - 1
		if n >= len(list) {
			return nil, false
		}
		req, _ := http.NewRequest(method, list[n], nil)
		return req, true
	}}
}

// Cycle is a Source of POST requests to fmt.Sprintf(format, k) for
// k = 1, 2 … spread, 1, 2 …, expecting 200.
func Cycle(format string, spread int) Source {
	var i atomic.Int64
	return Source{Want: http.StatusOK, Next: func() (*http.Request, bool) {
		k := int(i.Add(1)-1)%spread + 1
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf(format, k), nil)
		return req, true
	}}
}

// NewClient is the harness's HTTP client for workers connections.
func NewClient(workers int) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        workers * 2,
			MaxIdleConnsPerHost: workers * 2,
			MaxConnsPerHost:     workers * 2,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// Measure runs an unmeasured warm-up and then a measured phase.
func Measure(ctx context.Context, o bench.Options, c *http.Client, src Source) Result {
	if o.Warmup > 0 {
		Drive(ctx, c, o.Workers, o.Warmup, src)
	}
	return Drive(ctx, c, o.Workers, o.Phase, src)
}

// Drive sends requests from src with workers goroutines for d (or until
// src runs dry) and summarises them.
func Drive(ctx context.Context, c *http.Client, workers int, d time.Duration, src Source) Result {
	return driveRaw(ctx, c, workers, d, src).summary()
}

// MeasurePair measures two servers doing the same work, a (the floor)
// and b, both running: after a warm-up of each, the measured time of each
// is cut into slices run in turn (a b, b a, a b, …), so that a change in
// the machine's speed during the phase weighs on both alike. On this kind
// of shared VM the speed moves by tens of percent within a minute; two
// phases measured one after the other can differ by that much for the
// same server.
func MeasurePair(ctx context.Context, o bench.Options, c *http.Client, a, b Source) (Result, Result) {
	la, lb, _ := MeasurePairWarm(ctx, o, c, a, b)
	return la, lb
}

// MeasurePairWarm is MeasurePair that also returns b's warm-up (whose
// requests count too where the harness checks their effects).
func MeasurePairWarm(ctx context.Context, o bench.Options, c *http.Client, a, b Source) (Result, Result, Result) {
	var warmB Result
	if o.Warmup > 0 {
		Drive(ctx, c, o.Workers, o.Warmup, a)
		warmB = Drive(ctx, c, o.Workers, o.Warmup, b)
	}
	slices := max(2, int(o.Phase/(500*time.Millisecond)))
	slice := o.Phase / time.Duration(slices)
	var ra, rb rawLoad
	for i := range slices {
		first, second := &ra, &rb
		srcFirst, srcSecond := a, b
		if i%2 == 1 {
			first, second, srcFirst, srcSecond = second, first, srcSecond, srcFirst
		}
		first.add(driveRaw(ctx, c, o.Workers, slice, srcFirst))
		second.add(driveRaw(ctx, c, o.Workers, slice, srcSecond))
	}
	return ra.summary(), rb.summary(), warmB
}

// rawLoad is what Drive gathers, before it is summarised; the loads of
// several slices add up.
type rawLoad struct {
	lat      []time.Duration
	errs     int
	firstErr string
	elapsed  time.Duration
	cpu      time.Duration // server CPU used, when cpuKnown
	cpuKnown bool
	machine  time.Duration // the machine's busy CPU time (0: unknown)
	slices   int
}

func (r *rawLoad) add(o rawLoad) {
	r.lat = append(r.lat, o.lat...)
	r.errs += o.errs
	if r.firstErr == "" {
		r.firstErr = o.firstErr
	}
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.cpuKnown = (r.slices == 0 || r.cpuKnown) && o.cpuKnown
	r.machine += o.machine
	r.slices++
}

func (r rawLoad) summary() Result {
	all := slices.Clone(r.lat)
	slices.Sort(all)
	l := Result{Requests: len(all), Errors: r.errs, FirstError: r.firstErr}
	if len(all) > 0 {
		l.RPS = float64(len(all)) / r.elapsed.Seconds()
		l.P50Ms = ms(all[len(all)*50/100])
		l.P99Ms = ms(all[min(len(all)-1, len(all)*99/100)])
		if r.cpuKnown {
			l.ServerCPUus = float64(r.cpu.Microseconds()) / float64(len(all))
		}
		l.MachineCPUus = float64(r.machine.Microseconds()) / float64(len(all))
	}
	return l
}

// driveRaw is Drive without the summary.
func driveRaw(ctx context.Context, c *http.Client, workers int, d time.Duration, src Source) rawLoad {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu       sync.Mutex
		all      []time.Duration
		errs     int
		firstErr string
		wg       sync.WaitGroup
	)
	hosts := map[string]bool{} // the servers this phase loaded
	cpu0 := proc.CPUSnapshot()
	busy0, busyErr := proc.MachineBusy()
	start := time.Now()
	for range workers {
		wg.Go(func() {
			var lat []time.Duration
			var bad int
			var first string
			seen := map[string]bool{}
			for ctx.Err() == nil {
				req, ok := src.Next()
				if !ok {
					break
				}
				seen[req.URL.Host] = true
				t0 := time.Now()
				resp, err := c.Do(req.WithContext(context.WithoutCancel(ctx)))
				if err != nil {
					bad++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != src.Want {
					bad++
					if first == "" {
						first = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, strings.TrimSpace(string(body)))
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			for h := range seen {
				hosts[h] = true
			}
			all = append(all, lat...)
			errs += bad
			if firstErr == "" {
				firstErr = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	r := rawLoad{lat: all, errs: errs, firstErr: firstErr, elapsed: time.Since(start)}
	cpu1 := proc.CPUSnapshot()
	if busy1, err := proc.MachineBusy(); err == nil && busyErr == nil {
		r.machine = busy1 - busy0
	}
	r.cpuKnown = len(hosts) > 0
	for h := range hosts {
		t0, ok0 := cpu0[h]
		t1, ok1 := cpu1[h]
		r.cpuKnown = r.cpuKnown && ok0 && ok1
		r.cpu += t1 - t0
	}
	return r
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Repeat is a Source that sends the same GET forever.
func Repeat(u string) Source {
	return Source{Want: http.StatusOK, Next: func() (*http.Request, bool) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		return req, true
	}}
}

// PostJSON is a Source that POSTs the same JSON body forever, expecting 201.
func PostJSON(u, body string) Source {
	return Source{Want: http.StatusCreated, Next: func() (*http.Request, bool) {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return req, true
	}}
}
