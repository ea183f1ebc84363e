// Package ui is the foundation the admin console and the partner portal
// share: one layout, and the pieces every page is made of (a table with
// paging and filters, detail panels, confirmations, a secret shown once,
// small charts), server-rendered with html/template so that text from
// users is always escaped, and served under a strict
// Content-Security-Policy (no inline script or style; the pages need no
// script at all).
package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"gatehouse/internal/httpx"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CSP is every page's Content-Security-Policy: resources from the page's
// own origin only, no inline script or style, no framing, forms posting
// back to the same origin only.
const CSP = "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Nav is one entry of the layout's navigation.
type Nav struct {
	Name, Href string
}

// Page is what the layout needs of every page; Data is the page's own.
type Page struct {
	// Title names the page (the <title> and the <h1>).
	Title string
	// Product names the application in the header ("gatehouse console").
	Product string
	// Base is the path the application is mounted at ("/console/").
	Base string
	// Nav is the navigation; Current the Href that is marked current.
	Nav     []Nav
	Current string
	// Signed is the signed-in identity shown in the header ("" when none);
	// CSRF the token every form carries.
	Signed string
	CSRF   string
	// CanChange: the identity may change things (action buttons shown).
	// A page never decides who may do what: the API refuses anyway.
	CanChange bool
	// Flash is a one-time message (the outcome of the last action); Error
	// an error to show at the top.
	Flash, Error string
	// Theme is an extra stylesheet's URL (the portal's colour), or "".
	Theme string
	Data  any
}

// Renderer renders pages: the layout and the components, with one
// template per page.
type Renderer struct {
	pages map[string]*template.Template
	log   *slog.Logger
}

// New parses the shared templates plus each page template in pages (an
// fs of NAME.html files, each defining "content"); a page is rendered by
// its NAME.
func New(pages fs.FS, log *slog.Logger) (*Renderer, error) {
	base, err := template.New("layout").Funcs(Funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui templates: %w", err)
	}
	names, err := fs.Glob(pages, "*.html")
	if err != nil {
		return nil, err
	}
	r := &Renderer{pages: map[string]*template.Template{}, log: log}
	for _, n := range names {
		t, err := template.Must(base.Clone()).ParseFS(pages, n)
		if err != nil {
			return nil, fmt.Errorf("page %s: %w", n, err)
		}
		r.pages[strings.TrimSuffix(n, ".html")] = t
	}
	return r, nil
}

// Render writes page name with status, after the security headers. It
// renders into a buffer first so that a template error is a clean 500,
// not half a page.
func (r *Renderer) Render(w http.ResponseWriter, req *http.Request, status int, name string, p Page) {
	t, ok := r.pages[name]
	if !ok {
		r.log.ErrorContext(req.Context(), "ui: no such page", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		r.log.ErrorContext(req.Context(), "ui: render", "page", name, "err", err, "request_id", httpx.GetRequestID(req.Context()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	SecurityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// SecurityHeaders sets what every page answers with: the CSP, no
// sniffing, no framing, no referrer, and no caching (pages show data that
// changes, and a secret shown once must not be kept by the browser).
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// Static serves the shared stylesheet (and any later asset) under prefix.
func Static(prefix string) http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	fsrv := http.StripPrefix(prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}

// Funcs are the template helpers every page may use.
var Funcs = template.FuncMap{
	"time":    formatTime,
	"percent": percent,
	"bars":    Bars,
	"dict":    dict,
	"join":    strings.Join,
}

func formatTime(v any) string {
	switch t := v.(type) {
	case time.Time:
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	case *time.Time:
		if t == nil {
			return ""
		}
		return formatTime(*t)
	case string:
		if p, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return formatTime(p)
		}
		return t
	}
	return ""
}

func percent(v *float64) string {
	if v == nil {
		return "no attempts"
	}
	return fmt.Sprintf("%.1f %%", *v*100)
}

// dict builds a map from pairs, to hand a component several values.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}
