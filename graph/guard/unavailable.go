package guard

import (
	"context"
	"net/http"
	"sync/atomic"

	"gatehouse/internal/httpx"
)

type unavailableKey struct{}

// markUnavailable records that the response reports UNAVAILABLE, so that
// it goes out as HTTP 503: a dependency did not answer, and clients and
// load balancers retry a 503 where they would not retry a 200.
func markUnavailable(ctx context.Context) {
	if f, ok := ctx.Value(unavailableKey{}).(*atomic.Bool); ok {
		f.Store(true)
	}
}

// unavailableStatus answers 503 (with Retry-After) instead of 200 when an
// error of the response was UNAVAILABLE; 499 (httpx.StatusClientClosed)
// when the client went away, which is what cut the calls short.
func unavailableStatus(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		flag := new(atomic.Bool)
		sw := &statusWriter{ResponseWriter: w, flag: flag, ctx: r.Context()}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), unavailableKey{}, flag)))
	})
}

type statusWriter struct {
	http.ResponseWriter
	flag  *atomic.Bool
	ctx   context.Context // the request's
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.wrote = true
		if code == http.StatusOK && s.flag.Load() {
			if httpx.ClientGoneContext(s.ctx) {
				code = httpx.StatusClientClosed
			} else {
				s.Header().Set("Retry-After", "1")
				code = http.StatusServiceUnavailable
			}
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
