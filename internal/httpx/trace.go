package httpx

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/telemetry"
)

// Attribute keys of the server span that the front doors fill in.
const (
	// AttrAppKey is the partner app's key (public; never its secret).
	AttrAppKey = attribute.Key("gatehouse.app_key")
	// AttrAPIKeyName is the admin API key's name (never the key).
	AttrAPIKeyName = attribute.Key("gatehouse.api_key_name")
	// AttrCode is the business code of the reply (the envelope's code, or
	// a GraphQL error's extensions.code).
	AttrCode = attribute.Key("gatehouse.code")
)

// Callers say whether a listener's callers are inside the trust boundary
// of traces (see Trace).
type Callers bool

const (
	// Outside: partners (the public listener). Their traceparent becomes
	// a link of a new trace, never the parent.
	Outside Callers = false
	// Inside: operators and the company's services (the admin listener).
	// Their traceparent is the parent: their trace continues here.
	Inside Callers = true
)

// Trace makes the server span of each request: named by method and chi
// route pattern once routing is done ("GET /api/v1/orders/{orderNo}"; the
// method alone when no route matched), with the route, the status and what
// the front doors add (SpanOf). A caller's traceparent makes the span its
// child when the listener's callers are Inside; Outside, the span starts a
// trace of its own (the sampler decides as for a request without one) and
// the caller's context is only a link: a partner neither joins gatehouse's
// work to its trace nor decides its sampling, and its tracestate goes
// nowhere. It must run after RequestID and before Logger (whose line then
// carries the trace id). With tracing off it is not installed at all.
func Trace(tr *telemetry.Tracing, listener string, callers Callers) func(http.Handler) http.Handler {
	if !tr.On() {
		return func(next http.Handler) http.Handler { return next }
	}
	// The listener is the tracer's (an instrumentation scope attribute,
	// encoded once per export batch), not every span's.
	tracer := tr.Provider().Tracer(telemetry.ScopeName, trace.WithInstrumentationAttributes(attribute.String("gatehouse.listener", listener)))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, opts := r.Context(), []trace.SpanStartOption{serverKind}
			if callers == Inside {
				ctx = telemetry.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
			} else if remote := telemetry.Remote(r.Header); remote.IsValid() {
				opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: remote}))
			}
			ctx, span := tracer.Start(ctx, r.Method, opts...)
			defer span.End()
			if ri := infoFrom(ctx); ri != nil {
				ri.span = span
				if sc := span.SpanContext(); sc.IsValid() {
					ri.traceID = sc.TraceID().String()
				}
			}
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r.WithContext(ctx))
			if !span.IsRecording() {
				return
			}
			status := outcome(r, rec.status)
			// No route (a 404): the span is named by the method alone and
			// has no http.route, as the semantic conventions ask, so that
			// tools group unmatched requests apart from every route.
			route := ""
			if rc := chi.RouteContext(ctx); rc != nil {
				route = routePattern(rc, r)
			}
			if route != "" {
				span.SetName(r.Method + " " + route)
			} else {
				span.SetName(r.Method)
			}
			span.SetAttributes(serverAttrs(r, route, status)...)
			if status >= 500 {
				span.SetStatus(codes.Error, strconv.Itoa(status)+" "+http.StatusText(status))
			}
		})
	}
}

var serverKind = trace.WithSpanKind(trace.SpanKindServer)

// finder is a router that can name the pattern a request would match
// (chi.Mux.Find, which follows mounted routers).
type finder interface {
	Find(rctx *chi.Context, method, path string) string
}

// routePattern is the pattern the request matched. A request refused by
// a mounted router's guard (an API key's 401, a form's 403) never reached
// the router's own routes, so its pattern stops at the mount
// ("/console/*"): the route it was meant for is then asked of the tree.
func routePattern(rc *chi.Context, r *http.Request) string {
	route := rc.RoutePattern()
	if !strings.HasSuffix(route, "/*") {
		return route
	}
	f, ok := rc.Routes.(finder)
	if !ok {
		return route
	}
	// The request's method first; else the path's pattern under another
	// method (a method the route does not serve, as chi names a 405).
	for _, m := range append([]string{r.Method}, routeMethods...) {
		if p := f.Find(chi.NewRouteContext(), m, r.URL.Path); p != "" && p != route {
			return p
		}
	}
	return route
}

// routeMethods are the methods a route may be registered under.
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions}

// serverAttrs are the semantic-convention attributes of a server span,
// set in one call so that the span's attributes grow once. url.path
// (never the query: signatures travel there) only where the route does
// not already say it (a pattern with parameters, a 404). server.address
// and server.port are what the caller asked for (the Host header), the
// port being the scheme's default when the header names none.
func serverAttrs(r *http.Request, route string, status int) []attribute.KeyValue {
	scheme := "http"
	if RequestHTTPS(r) {
		scheme = "https"
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		attribute.String("http.request.method", r.Method),
		attribute.String("url.scheme", scheme),
		attribute.Int("http.response.status_code", status))
	if route != "" {
		attrs = append(attrs, attribute.String("http.route", route))
	}
	attrs = append(attrs, telemetry.ServerAttrs(scheme, r.Host)...)
	if path := r.URL.Path; path != route {
		attrs = append(attrs, attribute.String("url.path", path))
	}
	return attrs
}

// SpanOf returns the request's server span, or nil when tracing is off
// (or ctx is not a request's): front doors add their attributes to it
// (AttrAppKey, AttrAPIKeyName, AttrCode) at no cost when off.
func SpanOf(ctx context.Context) trace.Span {
	if ri := infoFrom(ctx); ri != nil && ri.span != nil {
		return ri.span
	}
	return nil
}

// TraceID returns the request's trace id ("" when untraced).
func TraceID(ctx context.Context) string {
	if ri := infoFrom(ctx); ri != nil {
		return ri.traceID
	}
	return ""
}
