package httpx

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// HSTS is the Strict-Transport-Security value of every response served
// over HTTPS: one year, so a browser that once reached the service over
// HTTPS never falls back to plain HTTP.
const HSTS = "max-age=31536000"

// clientInfo is who is calling and how, as far as the service can trust it.
type clientInfo struct {
	addr  string
	https bool
}

// Client works out the caller's address and whether the request came
// over HTTPS, and makes every response to an HTTPS request carry HSTS and
// only Secure cookies.
//
// X-Forwarded-For and X-Forwarded-Proto are believed only when the direct
// peer is one of trusted (the reverse proxies in front of the service);
// from anyone else they are ignored, so a caller cannot pick the address
// that login throttling counts, nor claim HTTPS it did not use.
func Client(trusted []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ci := resolveClient(r, trusted)
			if ci.https {
				w.Header().Set("Strict-Transport-Security", HSTS)
				w = &secureCookieWriter{ResponseWriter: w}
			}
			if ri := infoFrom(r.Context()); ri != nil {
				// After RequestID: its context value holds the caller too.
				ri.client, ri.clientSet = ci, true
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, &requestInfo{client: ci, clientSet: true})))
		})
	}
}

// ClientAddr is the caller's address as set by [Client] (the direct
// peer's, or the one a trusted proxy forwarded), without the port. Without
// the middleware it is the direct peer's.
func ClientAddr(r *http.Request) string {
	if ri := infoFrom(r.Context()); ri != nil && ri.clientSet {
		return ri.client.addr
	}
	return peerAddr(r).String()
}

// RequestHTTPS reports whether the caller used HTTPS, as set by [Client]
// (TLS on this connection, or X-Forwarded-Proto of a trusted proxy).
// Without the middleware it is whether this connection is TLS.
func RequestHTTPS(r *http.Request) bool {
	if ri := infoFrom(r.Context()); ri != nil && ri.clientSet {
		return ri.client.https
	}
	return r.TLS != nil
}

func peerAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// resolveClient walks X-Forwarded-For from the right (the hop nearest to
// the service) while the hops are trusted proxies: the first untrusted
// address is the client. Entries left of it were written by the client
// itself and are worth nothing.
func resolveClient(r *http.Request, trusted []netip.Prefix) clientInfo {
	peer := peerAddr(r)
	ci := clientInfo{addr: peer.String(), https: r.TLS != nil}
	if !peer.IsValid() {
		ci.addr = r.RemoteAddr
	}
	if !isTrusted(peer, trusted) {
		return ci
	}
	if proto := lastField(r.Header.Values("X-Forwarded-Proto")); proto != "" {
		ci.https = strings.EqualFold(proto, "https")
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // garbage: keep the last address a trusted hop vouched for
		}
		ci.addr = a.Unmap().String()
		if !isTrusted(a.Unmap(), trusted) {
			break
		}
	}
	return ci
}

// lastField is the right-most comma-separated value of a header: the one
// the nearest proxy added.
func lastField(values []string) string {
	if len(values) == 0 {
		return ""
	}
	parts := strings.Split(values[len(values)-1], ",")
	return strings.TrimSpace(parts[len(parts)-1])
}

// secureCookieWriter adds the Secure attribute to every cookie set on a
// response to an HTTPS request, including those of libraries (the session
// manager) whose cookie settings are fixed for the whole process.
type secureCookieWriter struct {
	http.ResponseWriter
	done bool
}

func (s *secureCookieWriter) secure() {
	if s.done {
		return
	}
	s.done = true
	h := s.ResponseWriter.Header()
	cookies := h.Values("Set-Cookie")
	if len(cookies) == 0 {
		return
	}
	out := make([]string, len(cookies))
	for i, c := range cookies {
		out[i] = c
		if !hasSecure(c) {
			out[i] = c + "; Secure"
		}
	}
	h["Set-Cookie"] = out
}

func hasSecure(cookie string) bool {
	for _, attr := range strings.Split(cookie, ";")[1:] {
		if strings.EqualFold(strings.TrimSpace(attr), "Secure") {
			return true
		}
	}
	return false
}

func (s *secureCookieWriter) WriteHeader(code int) {
	s.secure()
	s.ResponseWriter.WriteHeader(code)
}

func (s *secureCookieWriter) Write(b []byte) (int, error) {
	s.secure()
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *secureCookieWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
