package partnerapi

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/httpx"
	"gatehouse/internal/inventory"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/webhook"
)

// PartnerMountPattern is where Partner.Routes is mounted. Below it, each
// version of PartnerAPI has its router; any other /api/v{n} answers 404 in
// the envelope, and the rest of /api/ keeps the generic error shape.
const PartnerMountPattern = "/api"

// Partner serves the signed partner API, PartnerAPI. Per version: its
// headers (API-Version, Deprecation, Sunset) come first, then the 410 of a
// retired version, then routing
// (unknown path 404/5002, wrong method 405/5002 with Allow, neither
// consuming a nonce or a rate-limit slot), then the signed-request gate,
// then the endpoint, which finds the caller with partner.AdmittedFromContext.
type Partner struct {
	Gate      *partner.Gate
	Orders    *order.Service
	Inventory *inventory.Service
	// Usage counts admitted calls per app, version and day; nil: not counted.
	Usage *partner.Usage
	// Webhooks serves the partner's own webhooks (v3); nil: those
	// endpoints answer 500.
	Webhooks *webhook.Service
	// Versions are the lifecycles of the versions (deprecation, sunset),
	// from partner.NewVersions; a version missing here is simply served.
	Versions partner.Versions
	// Now is the clock of retirement (tests); nil means time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// HeaderAPIVersion names the version that answered.
const HeaderAPIVersion = "API-Version"

// HeaderDeprecatedFields lists the fields a version removes that its
// replies still carry, each with its removal date.
const HeaderDeprecatedFields = "Deprecated-Fields"

// Carries reports whether a reply still includes a field its version
// removes (partner.Version.Carries at the request's instant).
type Carries func(field string) bool

type carriesKey struct{}

// withCarries records, for the presenter, which removed fields of v a
// reply at now still carries.
func withCarries(ctx context.Context, v partner.Version, now time.Time) context.Context {
	return context.WithValue(ctx, carriesKey{}, Carries(func(f string) bool { return v.Carries(f, now) }))
}

// carriesFromContext is the request's Carries; a version that removes
// nothing carries every field.
func carriesFromContext(ctx context.Context) Carries {
	if c, ok := ctx.Value(carriesKey{}).(Carries); ok {
		return c
	}
	return func(string) bool { return true }
}

// The canonical forms of the header names set on every partner reply,
// computed once (Header.Set would canonicalise, and so allocate, per call).
var (
	keyAPIVersion         = http.CanonicalHeaderKey(HeaderAPIVersion)
	keyRateLimitLimit     = http.CanonicalHeaderKey("X-RateLimit-Limit")
	keyRateLimitRemaining = http.CanonicalHeaderKey("X-RateLimit-Remaining")
)

// Routes returns the partner API router, to be mounted at
// PartnerMountPattern: one sub-router per version of PartnerAPI.
func (h Partner) Routes() chi.Router {
	r := chi.NewRouter()
	for _, v := range PartnerAPI {
		r.Mount("/"+v.Name, h.versionRoutes(v))
	}
	unknown := func(w http.ResponseWriter, r *http.Request) {
		WriteEnvelopeErrorStatus(w, r, http.StatusNotFound, CodeParamInvalid,
			message(codeInfo[CodeParamInvalid].meaning, "unknown API version "+chi.URLParam(r, "version")))
	}
	r.HandleFunc("/{version:v[0-9]+}", unknown)
	r.HandleFunc("/{version:v[0-9]+}/*", unknown)
	return r
}

// versionRoutes is the router of one version.
func (h Partner) versionRoutes(v PartnerVersion) chi.Router {
	r := chi.NewRouter()
	r.Use(h.versionHeaders(v.Name))
	allowed := map[string][]string{}
	for _, e := range v.Endpoints {
		r.Method(e.Method, e.Path, h.signed(v.Name, e.Handler(h)))
		allowed[e.Path] = append(allowed[e.Path], e.Method)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteEnvelopeErrorStatus(w, r, http.StatusNotFound, CodeParamInvalid,
			message(codeInfo[CodeParamInvalid].meaning, "no endpoint /api/"+v.Name+routePath(r)))
	})
	mux := r
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// The methods whose routes match this path ("/webhooks/endpoints/7"
		// is the pattern "/webhooks/endpoints/{id}").
		var methods []string
		for _, ms := range allowed {
			for _, m := range ms {
				if !slices.Contains(methods, m) && mux.Match(chi.NewRouteContext(), m, routePath(r)) {
					methods = append(methods, m)
				}
			}
		}
		slices.Sort(methods)
		w.Header().Set("Allow", strings.Join(methods, ", "))
		WriteEnvelopeErrorStatus(w, r, http.StatusMethodNotAllowed, CodeParamInvalid,
			message(codeInfo[CodeParamInvalid].meaning, "method "+r.Method+" is not allowed; use "+strings.Join(methods, ", ")))
	})
	return r
}

// routePath is the path below the version ("/orders/query").
func routePath(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePath != "" {
		return rc.RoutePath
	}
	return "/"
}

// versionHeaders names the version and its lifecycle on every reply of
// the version: API-Version, "Deprecation: @<unix seconds>" (RFC 9745; the
// date may lie ahead), "Sunset: <HTTP-date>" (RFC 8594) and, while a
// removed field is still carried, `Deprecated-Fields: customer_info;
// removal="2027-05-27"`. After the
// sunset every path of the version answers 410/5002, before the signature
// is checked. An oversized body is refused here too: partner parameters
// travel in the query string; only the v3 webhook endpoints read a JSON
// body, bound to the signature by content_sha256.
func (h Partner) versionHeaders(version string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		versionValue := []string{version} // shared by every reply: never appended to in place (cap 1)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hd := w.Header()
			hd[keyAPIVersion] = versionValue
			v, _ := h.Versions.Get(version)
			if !v.Deprecated.IsZero() {
				hd.Set("Deprecation", "@"+strconv.FormatInt(v.Deprecated.Unix(), 10))
			}
			if !v.Sunset.IsZero() {
				hd.Set("Sunset", v.Sunset.UTC().Format(http.TimeFormat))
			}
			now := h.now()
			if len(v.Removed) > 0 {
				if f := v.DeprecatedFields(now); f != "" {
					hd.Set(HeaderDeprecatedFields, f)
				}
				r = r.WithContext(withCarries(r.Context(), v, now))
			}
			if v.Retired(now) {
				WriteEnvelopeErrorStatus(w, r, http.StatusGone, CodeParamInvalid,
					message(codeInfo[CodeParamInvalid].meaning, h.Versions.RetiredMessage(v, now)))
				return
			}
			if r.ContentLength > httpx.MaxBodyBytes {
				WriteEnvelopeErrorStatus(w, r, http.StatusRequestEntityTooLarge, CodeParamInvalid,
					message(codeInfo[CodeParamInvalid].meaning, "request body must be at most 64 KiB"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func (h Partner) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// signed runs the signed-request gate before next: on success the
// admitted request is in the context (partner.AdmittedFromContext) and the
// X-RateLimit-* headers are set; the call is counted for usage.
func (h Partner) signed(version string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Text is text: refused before the gate, like any malformed
		// request (no nonce consumed), on both backends alike.
		if httpx.QueryHasNUL(r.URL.RawQuery) {
			WriteEnvelopeError(w, r, CodeParamInvalid, httpx.MsgNUL)
			return
		}
		adm, err := h.Gate.Check(r.Context(), r.URL.RawQuery)
		if err != nil {
			WritePartnerError(w, r, h.Log, err)
			return
		}
		hd := w.Header()
		hd[keyRateLimitLimit] = []string{strconv.Itoa(adm.Limit)}
		hd[keyRateLimitRemaining] = []string{strconv.Itoa(adm.Remaining)}
		if h.Usage != nil {
			h.Usage.Add(adm.App.ID, version)
		}
		if sp := httpx.SpanOf(r.Context()); sp != nil {
			sp.SetAttributes(httpx.AttrAppKey.String(adm.App.AppKey))
		}
		next.ServeHTTP(w, r.WithContext(partner.NewContext(r.Context(), &adm)))
	})
}
