//go:build pprof

package main

// Built with -tags pprof (never in release builds), gatehouse serves
// net/http/pprof on GATEHOUSE_PPROF_ADDR, a loopback address, so that a
// running process can be profiled under the bench harness's load:
//
//	go build -tags pprof -o bin/gatehouse-pprof ./cmd/gatehouse
//	GATEHOUSE_PPROF_ADDR=127.0.0.1:6060 ./bin/gatehouse-bench -gatehouse bin/gatehouse-pprof …
//	go tool pprof -top 'http://127.0.0.1:6060/debug/pprof/profile?seconds=4'
//
// When the address is taken (a second process of the same run), that
// process goes without.

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

func init() {
	addr := os.Getenv("GATEHOUSE_PPROF_ADDR")
	if addr == "" {
		return
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintln(os.Stderr, "GATEHOUSE_PPROF_ADDR must be a loopback host:port; pprof off")
		return
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pprof off:", err)
		return
	}
	runtime.SetBlockProfileRate(10000) // one sample per 10 µs blocked
	runtime.SetMutexProfileFraction(100)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	// Heap objects allocated so far and requests served: read twice during
	// a load phase; the differences' ratio is the allocations per request.
	mux.HandleFunc("/debug/mallocs", func(w http.ResponseWriter, _ *http.Request) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		var requests uint64
		if mfs, err := prometheus.DefaultGatherer.Gather(); err == nil {
			for _, mf := range mfs {
				if mf.GetName() != "gatehouse_http_request_duration_seconds" {
					continue
				}
				for _, m := range mf.GetMetric() {
					requests += m.GetHistogram().GetSampleCount()
				}
			}
		}
		fmt.Fprintln(w, m.Mallocs, requests)
	})
	go func() { _ = http.Serve(l, mux) }()
}
