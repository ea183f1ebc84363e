package playground

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"strings"
)

// The Playground's files (GraphiQL and React), vendored so that the page
// works with no access to a CDN; see README.md.
//
//go:embed README.md graphiql-4.1.2 react-18.2.0 react-dom-18.2.0
var playgroundFiles embed.FS

// PlaygroundAssetsPath is where the Playground's files are served.
const PlaygroundAssetsPath = "/playground/"

// playgroundAsset is one vendored file and its Subresource Integrity hash
// as gqlgen publishes it for the CDN copy.
type playgroundAsset struct {
	path string
	sri  string
}

var (
	graphiqlJS  = playgroundAsset{"graphiql-4.1.2/graphiql.min.js", "sha256-hnImuor1znlJkD/FOTL3jayfS/xsyNoP04abi8bFJWs="}
	graphiqlCSS = playgroundAsset{"graphiql-4.1.2/graphiql.min.css", "sha256-MEh+B2NdMSpj9kexQNN3QKc8UzMrCXW/Sx/phcpuyIU="}
	reactJS     = playgroundAsset{"react-18.2.0/react.production.min.js", "sha256-S0lp+k7zWUMk2ixteM6HZvu8L9Eh//OVrt+ZfbCpmgY="}
	reactDOMJS  = playgroundAsset{"react-dom-18.2.0/react-dom.production.min.js", "sha256-IXWO0ITNDjfnNXIu5POVfqlgYoop36bDzhodR6LW5Pc="}
)

func (a playgroundAsset) url() string { return PlaygroundAssetsPath + a.path }

// The Playground's own page and icon (playgroundpage/).
//
//go:embed playgroundpage
var pageFiles embed.FS

// FaviconPath is where the Playground's icon is served.
const FaviconPath = "/favicon.svg"

// playgroundStoragePrefix namespaces what the page keeps in the browser's
// local storage: the API key and GraphiQL's tabs, headers and history.
const playgroundStoragePrefix = "gatehouse-admin-v2:"

var pageTemplate = template.Must(template.ParseFS(pageFiles, "playgroundpage/index.html"))

// PlaygroundPage returns the Playground page for endpoint: GraphiQL under
// a bar where the operator types the API key. The key is kept in the
// browser's local storage (it survives reloads), sent as X-API-Key with
// every request, and checked as soon as it is typed, after which the
// schema is fetched with it. The first visit opens with tabs of ready
// queries for the everyday tasks (playgroundTabs).
func PlaygroundPage(title, endpoint string) http.Handler {
	type asset struct{ URL, SRI string }
	var buf bytes.Buffer
	err := pageTemplate.Execute(&buf, map[string]any{
		"Title":         title,
		"Endpoint":      endpoint,
		"Favicon":       FaviconPath,
		"StoragePrefix": playgroundStoragePrefix,
		"Tabs":          playgroundTabs,
		"JS":            asset{graphiqlJS.url(), graphiqlJS.sri},
		"CSS":           asset{graphiqlCSS.url(), graphiqlCSS.sri},
		"React":         asset{reactJS.url(), reactJS.sri},
		"ReactDOM":      asset{reactDOMJS.url(), reactDOMJS.sri},
	})
	if err != nil {
		panic(err) // the template and its data are fixed at build time
	}
	page := buf.Bytes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// Never inside another site's frame: a page that framed the
		// Playground (the key is in its local storage) could lure an
		// operator into clicking a mutation's Run button.
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		w.Header().Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(page)
	})
}

// Favicon serves the Playground's icon (also asked for as /favicon.ico).
func Favicon() http.Handler {
	icon, err := pageFiles.ReadFile("playgroundpage/favicon.svg")
	if err != nil {
		panic(err) // embedded at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(icon)
	})
}

// PlaygroundAssets serves the vendored files under PlaygroundAssetsPath.
// Paths carry versions, so the files are cached for good.
func PlaygroundAssets() http.Handler {
	files := http.StripPrefix(PlaygroundAssetsPath, http.FileServerFS(playgroundFiles))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
