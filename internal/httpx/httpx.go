// Package httpx is the HTTP plumbing shared by both listeners: request ids,
// one structured log line per request, panic recovery, body limits, and the
// JSON writers every front door uses.
package httpx

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/errs"
	"gatehouse/internal/requestlog"
	"gatehouse/internal/secret"
)

// MaxBodyBytes is the largest request body accepted (64 KiB).
const MaxBodyBytes = 64 << 10

type ctxKey int

const requestIDKey ctxKey = iota

// HeaderRequestID carries the request id in both directions.
const HeaderRequestID = "X-Request-Id"

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// RequestID takes the caller's X-Request-Id when it is well-formed, else
// makes one, and echoes it on the response.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID.MatchString(id) {
			id = secret.RandomToken("", 12)
		}
		// HeaderRequestID is in canonical form: no canonicalising copy of the key.
		w.Header()[HeaderRequestID] = []string{id}
		ri := &requestInfo{id: id}
		if prev := infoFrom(r.Context()); prev != nil {
			ri.client, ri.clientSet = prev.client, prev.clientSet // Client ran first
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, ri)))
	})
}

// requestInfo is what the first middlewares learn about a request, kept
// in one context value so that the request is copied once for all of it
// (RequestID sets it; Client fills in the caller, when it runs after).
type requestInfo struct {
	id        string
	client    clientInfo
	clientSet bool
	// span and traceID are the server span and its trace id (Trace);
	// nil and "" when tracing is off.
	span    trace.Span
	traceID string
	// timeout is the request timeout (Deadline), 0 without one.
	timeout time.Duration
	// waitedOn is the dependency that work cut short by the client's
	// going away was waiting on (NoteAbandoned), nil when unknown.
	waitedOn atomic.Pointer[errs.Dependency]
	// refusals counts the requests refused for a dependency (Refusals);
	// depRefused is set when this one was (DependencyRefused).
	refusals   RefusalRecorder
	depRefused atomic.Bool
	// shed is set when load shedding refused the request (MarkShed).
	shed atomic.Bool
}

func infoFrom(ctx context.Context) *requestInfo {
	ri, _ := ctx.Value(requestIDKey).(*requestInfo)
	return ri
}

// GetRequestID returns the request id set by RequestID.
func GetRequestID(ctx context.Context) string {
	if ri := infoFrom(ctx); ri != nil {
		return ri.id
	}
	return ""
}

// statusRecorder remembers the status and size written.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

var requestDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "gatehouse_http_request_duration_seconds",
	Help:    "HTTP request latency by listener, method (OTHER for any but the standard ones) and status code (499: the client went away).",
	Buckets: prometheus.DefBuckets,
}, []string{"listener", "method", "status"})

var responsesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "gatehouse_http_responses_total",
	Help: "HTTP responses by listener and status class (2xx, 3xx, 4xx, 5xx, and client_closed for requests whose client went away before the answer, logged as status 499); every class exists at 0 from the start (the error-rate alert divides them).",
}, []string{"listener", "class"})

// ClassClientClosed is the response class of a request whose client went
// away before its answer (StatusClientClosed): neither a 4xx of the
// client's nor a 5xx of the server's.
const ClassClientClosed = "client_closed"

// responseClasses are a listener's counters by status/100 (index 2 to 5;
// a status outside 200-599 counts as 5xx, as it is no valid reply), and
// at index 6 the requests whose client went away.
type responseClasses [7]prometheus.Counter

func newResponseClasses(listener string) *responseClasses {
	var c responseClasses
	for i, class := range []string{"2xx", "3xx", "4xx", "5xx", ClassClientClosed} {
		c[i+2] = responsesTotal.WithLabelValues(listener, class)
	}
	return &c
}

func (c *responseClasses) count(status int) {
	i := status / 100
	switch {
	case status == StatusClientClosed:
		i = 6
	case i < 2 || i > 5:
		i = 5
	}
	c[i].Inc()
}

// durationCache keeps the latency histogram of each method and status a
// listener has answered, so that a request does not hash its labels.
type durationCache struct {
	listener string
	seen     sync.Map // durationKey → prometheus.Observer
}

type durationKey struct {
	method string
	status int
}

func newDurationCache(listener string) *durationCache {
	return &durationCache{listener: listener}
}

func (c *durationCache) observer(method string, status int) prometheus.Observer {
	if !isStandardMethod(method) {
		// The client chooses the method: one series per made-up method
		// would let anyone grow the metrics (and this cache) without bound.
		method = "OTHER"
	}
	k := durationKey{method, status}
	if o, ok := c.seen.Load(k); ok {
		return o.(prometheus.Observer)
	}
	// The numeric code ("503", "499" for a client that went away), as
	// queries such as status=~"5.." expect.
	o := requestDuration.WithLabelValues(c.listener, method, strconv.Itoa(status))
	c.seen.Store(k, o)
	return o
}

func isStandardMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// Logger writes one line per request (see package requestlog) — but a
// request refused by load shedding (MarkShed), which is only counted. It logs
// the path without the query string: signed requests carry signatures and
// nonces there. A request whose client went away before the answer is
// logged at INFO with status 499 (StatusClientClosed), counted in its own
// class, never as a server error — at WARN, with a line saying which
// dependency it waited on, when it had waited more than half of the
// request timeout (slowAbandon): a slow dependency, not a client.
func Logger(log *slog.Logger, listener string) func(http.Handler) http.Handler {
	durations := newDurationCache(listener)
	classes := newResponseClasses(listener)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			status := outcome(r, rec.status)
			d := time.Since(start)
			durations.observer(r.Method, status).Observe(d.Seconds())
			classes.count(status)
			ctx := r.Context()
			ri := infoFrom(ctx)
			lvl := slog.LevelInfo
			switch {
			case ri.wasShed():
				// Counted above; summarised once a second by the shedding
				// itself: a line per refusal would cost more than the refusal.
				return
			case refusedByDependency(ri, status):
				// Counted in the summary line (DependencyRefused).
			case status >= 500:
				lvl = slog.LevelError
			case slowAbandon(ri, status, d):
				lvl = slog.LevelWarn
				logSlowAbandon(ctx, log, ri, d)
			}
			h := log.Handler()
			if !h.Enabled(ctx, lvl) {
				return
			}
			// The line goes to the handler directly: Logger.LogAttrs would
			// also capture the caller's program counter (runtime.Callers, a
			// tenth of the line's cost), which no handler here reads.
			l := requestlog.Line{
				Listener: listener, Method: r.Method, Path: r.URL.Path, Status: status, Bytes: rec.bytes,
				Duration: d, Remote: ClientAddr(r),
			}
			if ri != nil {
				l.RequestID, l.TraceID = ri.id, ri.traceID
			}
			requestlog.Write(ctx, h, time.Now(), lvl, &l)
		})
	}
}

// Recoverer turns a panic into a 500 in the generic error shape, logged
// with its stack; http.ErrAbortHandler is re-raised as net/http expects.
func Recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				stack := debug.Stack()
				if p, ok := v.(*HandlerPanic); ok { // raised on another goroutine
					v, stack = p.Value, p.Stack
				}
				log.ErrorContext(r.Context(), "panic", "panic", v, "request_id", GetRequestID(r.Context()), "stack", string(stack))
				WriteError(w, http.StatusInternalServerError, "internal_error", "internal error")
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// HandlerPanic is a handler's panic raised again on the goroutine that
// waited for it (internal/shed runs admitted requests on pooled
// goroutines): Recoverer logs Value and the handler's Stack.
type HandlerPanic struct {
	Value any
	Stack []byte
}

func (p *HandlerPanic) Error() string { return fmt.Sprint("handler panic: ", p.Value) }

// CapBody caps every request body at MaxBodyBytes, so a decoder sees
// *http.MaxBytesError past the limit and answers 413 in its own front
// door's shape (ticket errors, OAuth errors, the partner envelope).
func CapBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// LimitBody is CapBody plus an early 413 in the generic error shape for
// bodies announced larger than MaxBodyBytes (the admin listener, whose
// GraphQL transport would otherwise answer a read error of its own).
func LimitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodyBytes {
			WriteError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "request body must be at most 64 KiB")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// WriteJSON writes v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorBody is the error shape of the ticket API and the auth schemes.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message,omitempty"`
}

// WriteError writes {"error": code, "message": msg}.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	WriteJSON(w, status, ErrorBody{Error: code, Message: msg})
}
