package graph

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql/playground"
)

// The Playground's files (GraphiQL and React), vendored so that the page
// works with no access to a CDN; see playground/README.md.
//
//go:embed playground
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

// PlaygroundPage returns the GraphiQL page for endpoint. Its headers editor
// starts with an empty X-API-Key for the user to fill in; headers are kept
// in the browser's local storage.
func PlaygroundPage(title, endpoint string) http.Handler {
	return playground.Handler(title, endpoint,
		playground.WithGraphiqlVersion(graphiqlJS.url(), graphiqlCSS.url(), graphiqlJS.sri, graphiqlCSS.sri),
		playground.WithGraphiqlReactVersion(reactJS.url(), reactDOMJS.url(), reactJS.sri, reactDOMJS.sri),
		playground.WithGraphiqlUiHeaders(map[string]string{HeaderAPIKey: ""}),
		playground.WithStoragePrefix("gatehouse-admin:"),
	)
}

// PlaygroundAssets serves the vendored files under PlaygroundAssetsPath.
// Paths carry versions, so the files are cached for good.
func PlaygroundAssets() http.Handler {
	sub, err := fs.Sub(playgroundFiles, "playground")
	if err != nil {
		panic(err) // the embedded folder exists at build time
	}
	files := http.StripPrefix(PlaygroundAssetsPath, http.FileServerFS(sub))
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

// subresourceIntegrity computes the SRI value of an embedded file.
func subresourceIntegrity(path string) (string, error) {
	b, err := playgroundFiles.ReadFile("playground/" + path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:]), nil
}
