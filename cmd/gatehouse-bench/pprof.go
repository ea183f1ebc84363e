//go:build pprof

package main

// Built with -tags pprof, a baseline child process serves net/http/pprof
// on GATEHOUSE_BENCH_PPROF_ADDR (a loopback address) when its -mode is
// GATEHOUSE_BENCH_PPROF_MODE, so that a floor can be profiled under the
// same load as gatehouse and the two profiles compared:
//
//	go build -tags pprof -o bin/gatehouse-bench-pprof ./cmd/gatehouse-bench
//	GATEHOUSE_BENCH_PPROF_ADDR=127.0.0.1:6061 GATEHOUSE_BENCH_PPROF_MODE=sqlite-select \
//	  ./bin/gatehouse-bench-pprof …

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
)

func init() {
	addr := os.Getenv("GATEHOUSE_BENCH_PPROF_ADDR")
	if addr == "" || len(os.Args) < 2 || os.Args[1] != "baseline" || !slices.Contains(os.Args, os.Getenv("GATEHOUSE_BENCH_PPROF_MODE")) {
		return
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		return
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	go func() { _ = http.Serve(l, mux) }()
}
