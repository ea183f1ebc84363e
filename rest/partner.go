package rest

import (
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/httpx"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
)

// PartnerMountPattern is where Partner.Routes is mounted: every
// /api/v{n}/ path, so that unknown versions and paths also answer in the
// envelope.
const PartnerMountPattern = "/api/{version:v[0-9]+}"

// Partner serves the signed partner API. Routing comes first (unknown path
// 404/5002, wrong method 405/5002 with Allow, neither consuming a nonce or
// a rate-limit slot), then the signed-request gate, then the business
// handler, which finds the caller with partner.FromContext.
type Partner struct {
	Gate   *partner.Gate
	Orders *order.Service
	// Usage counts admitted calls per app, version and day; nil: not counted.
	Usage *partner.Usage
	// Lifecycle marks versions deprecated and gives them a sunset date.
	Lifecycle map[string]VersionLifecycle
	Log       *slog.Logger
	// Extra adds signed endpoints next to the built-in ones, e.g.
	// {Version: "v1", Method: "POST", Path: "/inventory/deduct", Handler: h}.
	Extra []PartnerRoute
}

// PartnerRoute is one signed endpoint: Path is relative to /api/{Version}.
type PartnerRoute struct {
	Version, Method, Path string
	Handler               http.Handler
}

// VersionLifecycle is the deprecation state of an API version; zero times
// are not announced.
type VersionLifecycle struct {
	// Deprecated is sent as "Deprecation: @<unix seconds>" (RFC 9745); it
	// may lie in the future.
	Deprecated time.Time
	// Sunset is sent as "Sunset: <HTTP-date>" (RFC 8594).
	Sunset time.Time
}

// HeaderAPIVersion names the version that answered.
const HeaderAPIVersion = "API-Version"

// Routes returns the handler to mount at PartnerMountPattern.
func (h Partner) Routes() http.Handler {
	table := map[string]map[string]map[string]http.Handler{}
	add := func(rt PartnerRoute) {
		if table[rt.Version] == nil {
			table[rt.Version] = map[string]map[string]http.Handler{}
		}
		if table[rt.Version][rt.Path] == nil {
			table[rt.Version][rt.Path] = map[string]http.Handler{}
		}
		table[rt.Version][rt.Path][rt.Method] = h.signed(rt.Version, rt.Handler)
	}
	add(PartnerRoute{"v1", http.MethodGet, "/orders/query", h.orderQuery(func(o order.Order) any { return order.RenderV1(o) })})
	add(PartnerRoute{"v2", http.MethodGet, "/orders/query", h.orderQuery(func(o order.Order) any { return order.RenderV2(o) })})
	for _, rt := range h.Extra {
		add(rt)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		version := chi.URLParam(r, "version")
		paths, ok := table[version]
		if !ok {
			WriteEnvelopeErrorStatus(w, r, http.StatusNotFound, CodeParamInvalid,
				message(codeInfo[CodeParamInvalid].meaning, "unknown API version "+version))
			return
		}
		h.versionHeaders(w.Header(), version)
		// Partner parameters travel in the query string; a body is never
		// read, so an oversized one is refused here, in the envelope.
		if r.ContentLength > httpx.MaxBodyBytes {
			WriteEnvelopeErrorStatus(w, r, http.StatusRequestEntityTooLarge, CodeParamInvalid,
				message(codeInfo[CodeParamInvalid].meaning, "request body must be at most 64 KiB"))
			return
		}
		path := "/"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePath != "" {
			path = rc.RoutePath
		}
		methods, ok := paths[path]
		if !ok {
			writeNotFound(w, r, version+path)
			return
		}
		handler, ok := methods[r.Method]
		if !ok {
			allowed := make([]string, 0, len(methods))
			for m := range methods {
				allowed = append(allowed, m)
			}
			slices.Sort(allowed)
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			WriteEnvelopeErrorStatus(w, r, http.StatusMethodNotAllowed, CodeParamInvalid,
				message(codeInfo[CodeParamInvalid].meaning, "method "+r.Method+" is not allowed; use "+strings.Join(allowed, ", ")))
			return
		}
		handler.ServeHTTP(w, r)
	})
}

func writeNotFound(w http.ResponseWriter, r *http.Request, what string) {
	WriteEnvelopeErrorStatus(w, r, http.StatusNotFound, CodeParamInvalid,
		message(codeInfo[CodeParamInvalid].meaning, "no endpoint /api/"+what))
}

func (h Partner) versionHeaders(hd http.Header, version string) {
	hd.Set(HeaderAPIVersion, version)
	lc, ok := h.Lifecycle[version]
	if !ok {
		return
	}
	if !lc.Deprecated.IsZero() {
		hd.Set("Deprecation", "@"+strconv.FormatInt(lc.Deprecated.Unix(), 10))
	}
	if !lc.Sunset.IsZero() {
		hd.Set("Sunset", lc.Sunset.UTC().Format(http.TimeFormat))
	}
}

// signed runs the signed-request gate before next: on success the
// admitted request is in the context (partner.FromContext) and the
// X-RateLimit-* headers are set; the call is counted for usage.
func (h Partner) signed(version string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		adm, err := h.Gate.Check(r.Context(), r.URL.RawQuery)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		hd := w.Header()
		hd.Set("X-RateLimit-Limit", strconv.Itoa(adm.Limit))
		hd.Set("X-RateLimit-Remaining", strconv.Itoa(adm.Remaining))
		if h.Usage != nil {
			h.Usage.Add(adm.App.ID, version)
		}
		next.ServeHTTP(w, r.WithContext(partner.NewContext(r.Context(), &adm)))
	})
}

// orderQuery serves GET /api/v{n}/orders/query with the shape of render.
func (h Partner) orderQuery(render func(order.Order) any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		adm, _ := partner.AdmittedFromContext(r.Context())
		q, err := order.ParseQuery(adm.Query.Get)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		o, err := h.Orders.QueryForApp(r.Context(), adm.App.ID, q.OrderNo)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		WriteEnvelope(w, r, render(o))
	})
}
