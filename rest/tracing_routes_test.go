package rest_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/telemetry/telemetrytest"
	"gatehouse/internal/testenv"
)

// routeParam matches a chi URL parameter ({id}, {orderNo:[0-9]+}).
var routeParam = regexp.MustCompile(`\{[^}]*\}`)

// TestSpanNamesAreRoutePatterns: on every route of both listeners the
// server span is named "METHOD pattern" and its http.route is the pattern
// (the sign-in routes, attached whole, read their pattern twice before:
// "POST /oauth/token/oauth/token"); a request no route matches is named by
// its method alone and has no http.route. Every server span says where the
// caller sent it: url.scheme, server.address (the host alone) and
// server.port.
func TestSpanNamesAreRoutePatterns(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rec := telemetrytest.New(t)
		e := apptest.Start(t, b, func(c *config.Config) { c.Tracing = rec.Tracing })
		checked := 0
		for _, l := range []struct {
			base string
			h    http.Handler
		}{{e.PublicURL, e.App.Public}, {e.AdminURL, e.App.Admin}} {
			base, err := url.Parse(l.base)
			if err != nil {
				t.Fatal(err)
			}
			port, _ := strconv.Atoi(base.Port())
			routes, ok := l.h.(chi.Routes)
			if !ok {
				t.Fatalf("%T is not a chi router", l.h)
			}
			err = chi.Walk(routes, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
				switch method {
				case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				default:
					return nil
				}
				path := concretePath(pattern)
				status := send(t, e, method, l.base+path)
				if status == http.StatusMethodNotAllowed {
					return nil // a router attached whole answers its other methods
				}
				checked++
				s := serverSpan(t, rec, method, path, port)
				want := method + " " + strings.TrimSuffix(pattern, "/")
				if pattern == "/" {
					want = method + " /"
				}
				if s.Name != want {
					t.Errorf("%s %s (%d): span named %q, want %q", method, path, status, s.Name, want)
				}
				if v, _ := telemetrytest.Attr(s, attrKey("http.route")); method+" "+v.AsString() != want {
					t.Errorf("%s %s: http.route %q, want the pattern of %q", method, path, v.AsString(), want)
				}
				if v, _ := telemetrytest.Attr(s, attrKey("server.address")); v.AsString() != base.Hostname() {
					t.Errorf("%s %s: server.address %q, want %q", method, path, v.AsString(), base.Hostname())
				}
				if v, _ := telemetrytest.Attr(s, attrKey("url.scheme")); v.AsString() != "http" {
					t.Errorf("%s %s: url.scheme %q, want http", method, path, v.AsString())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if checked < 20 {
			t.Fatalf("checked only %d routes", checked)
		}
		for _, p := range []string{"/oauth/token", "/api/auth/login"} {
			rec.Wait(t, "POST "+p, telemetrytest.Named("POST "+p))
		}

		send(t, e, http.MethodGet, e.PublicURL+"/no/such/thing")
		pub, _ := url.Parse(e.PublicURL)
		pubPort, _ := strconv.Atoi(pub.Port())
		s := serverSpan(t, rec, http.MethodGet, "/no/such/thing", pubPort)
		if s.Name != "GET" {
			t.Errorf("unmatched request's span named %q, want GET", s.Name)
		}
		if v, ok := telemetrytest.Attr(s, attrKey("http.route")); ok {
			t.Errorf("unmatched request's span has http.route %q", v.AsString())
		}
	})
}

// send makes a request without credentials or body: its answer does not
// matter, only that routing happened.
func send(t *testing.T, e *apptest.Env, method, rawURL string) int {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// concretePath is a path pattern matches: each parameter filled with a
// value its regular expression (if any) accepts, a trailing * with "x".
func concretePath(pattern string) string {
	p := routeParam.ReplaceAllStringFunc(pattern, func(param string) string {
		_, re, ok := strings.Cut(strings.Trim(param, "{}"), ":")
		for _, v := range []string{"1", "v9"} {
			if !ok || regexp.MustCompile("^(?:"+re+")$").MatchString(v) {
				return v
			}
		}
		return "1"
	})
	if strings.HasSuffix(p, "*") {
		p = strings.TrimSuffix(p, "*") + "x"
	}
	return p
}

// serverSpan waits for the server span of a request to the listener on
// port: the path is its url.path, or its http.route when that already
// says it.
func serverSpan(t *testing.T, rec *telemetrytest.Recorder, method, path string, port int) tracetest.SpanStub {
	t.Helper()
	return rec.Wait(t, "of "+method+" "+path+" on port "+strconv.Itoa(port), func(s tracetest.SpanStub) bool {
		if s.SpanKind != trace.SpanKindServer {
			return false
		}
		if p, _ := telemetrytest.Attr(s, attrKey("server.port")); p.AsInt64() != int64(port) {
			return false
		}
		if m, _ := telemetrytest.Attr(s, attrKey("http.request.method")); m.AsString() != method {
			return false
		}
		if p, ok := telemetrytest.Attr(s, attrKey("url.path")); ok {
			return p.AsString() == path
		}
		r, _ := telemetrytest.Attr(s, attrKey("http.route"))
		return r.AsString() == path
	})
}

func attrKey(k string) attribute.Key { return attribute.Key(k) }
