package sink

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// OTLP is the discarding OTLP/HTTP collector of the traced phase, in
// the harness process, on loopback: it reads each export to the end,
// counts it and answers 200 with an empty ExportTraceServiceResponse (an
// empty protobuf message is zero bytes), so that gatehouse pays for
// making, batching, encoding and sending its spans, and nothing waits on
// a collector's storage.
type OTLP struct {
	url string
	srv *http.Server
	// Exports counts the exports received, Bytes their bodies' bytes.
	Exports atomic.Int64
	Bytes   atomic.Int64
}

// StartOTLP serves an OTLP sink on a free loopback port.
func StartOTLP() (*OTLP, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &OTLP{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.Bytes.Add(n)
		s.Exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Close stops the sink.
func (s *OTLP) Close() { _ = s.srv.Shutdown(context.Background()) }

// TracingEnv turns tracing on in a gatehouse process: every request
// sampled, spans sent over OTLP/HTTP to the sink with the SDK's default
// batch span processor (the settings an operator starts from).
func (s *OTLP) TracingEnv() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + s.url, "OTEL_TRACES_SAMPLER=always_on", "OTEL_SERVICE_NAME=gatehouse-bench"}
}
