package httpx

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"gatehouse/internal/errs"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestClientGoneIsLoggedAs499: a server error answered to a request whose
// client went away (its context cancelled, not by the deadline) is logged
// at INFO as 499 and counted as client_closed; the same error after the
// request deadline stays a 503 at ERROR; the client_closed class exists
// at 0 before any such request.
func TestClientGoneIsLoggedAs499(t *testing.T) {
	const listener = "test-gone"
	var logs bytes.Buffer
	h := RequestID(Logger(slog.New(slog.NewTextHandler(&logs, nil)), listener)(Deadline(time.Minute)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		w.WriteHeader(http.StatusServiceUnavailable) // a front door that did not check ClientGone
	}))))
	closed := responsesTotal.WithLabelValues(listener, ClassClientClosed)
	fivexx := responsesTotal.WithLabelValues(listener, "5xx")
	if v := counterValue(t, closed); v != 0 {
		t.Fatalf("client_closed = %v at start", v)
	}
	for _, c := range []struct {
		name       string
		ctx        func() (context.Context, context.CancelFunc)
		want       string
		closed, sx float64
	}{
		{"client gone", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, "level=INFO msg=request listener=" + listener + " method=GET path=/x status=499", 1, 0},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(context.Background(), 0, ErrDeadline)
		}, "level=ERROR msg=request listener=" + listener + " method=GET path=/x status=503", 1, 1},
	} {
		logs.Reset()
		ctx, cancel := c.ctx()
		cancel()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx))
		if !strings.Contains(logs.String(), c.want) {
			t.Errorf("%s: line %q, want %q", c.name, logs.String(), c.want)
		}
		if v := counterValue(t, closed); v != c.closed {
			t.Errorf("%s: client_closed = %v, want %v", c.name, v, c.closed)
		}
		if v := counterValue(t, fivexx); v != c.sx {
			t.Errorf("%s: 5xx = %v, want %v", c.name, v, c.sx)
		}
	}
}

// TestSlowAbandonWarns: a client that gives up after more than half of
// the request timeout was waiting on a slow dependency, not merely
// impatient: the request line (still 499, client_closed) is at WARN,
// after a WARN line naming the dependency the cut-short work waited on
// ("unknown" when its error names none). A client that leaves early stays
// at INFO with no such line.
func TestSlowAbandonWarns(t *testing.T) {
	const listener = "test-slow-gone"
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var cause error
	h := RequestID(Logger(log, listener)(Deadline(400 * time.Millisecond)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		if !ClientGone(r) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		Abandon(w, r, log, "test", cause)
	}))))
	closed := responsesTotal.WithLabelValues(listener, ClassClientClosed)
	for i, c := range []struct {
		name   string
		after  time.Duration // the client leaves then
		cause  error
		want   []string
		absent string
	}{
		{"early", 20 * time.Millisecond, fmt.Errorf("%w: %w unavailable: %w", errs.Unavailable, errs.Database, context.Canceled),
			[]string{"level=INFO msg=request listener=" + listener + " method=GET path=/x status=499"}, "level=WARN"},
		{"slow database", 250 * time.Millisecond, fmt.Errorf("%w: %w unavailable: %w", errs.Unavailable, errs.Database, context.Canceled),
			[]string{"level=WARN msg=\"" + slowAbandonMsg + "\" waited_on=database waited_ms=", "request_timeout=400ms",
				"level=WARN msg=request listener=" + listener + " method=GET path=/x status=499"}, "level=ERROR"},
		{"slow Redis", 250 * time.Millisecond, fmt.Errorf("%w: %w get: %w", errs.Unavailable, errs.KV, context.Canceled),
			[]string{"waited_on=kv", "level=WARN msg=request"}, "level=ERROR"},
		{"slow, unnamed", 250 * time.Millisecond, context.Canceled,
			[]string{"waited_on=unknown", "level=WARN msg=request"}, "level=ERROR"},
	} {
		logs.Reset()
		cause = c.cause
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(c.after, cancel)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx))
		timer.Stop()
		cancel()
		for _, w := range c.want {
			if !strings.Contains(logs.String(), w) {
				t.Errorf("%s: lines %q, want %q", c.name, logs.String(), w)
			}
		}
		if strings.Contains(logs.String(), c.absent) {
			t.Errorf("%s: lines %q hold %q", c.name, logs.String(), c.absent)
		}
		if v := counterValue(t, closed); v != float64(i+1) {
			t.Errorf("%s: client_closed = %v, want %v", c.name, v, i+1)
		}
	}
}
