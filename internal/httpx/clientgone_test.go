package httpx

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
