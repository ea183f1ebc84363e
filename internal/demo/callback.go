package demo

import (
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"gatehouse/internal/oauth"
)

// CallbackPath is the path of the demo's OAuth redirect URI on the demo
// receiver (`gatehouse webhook listen`).
const CallbackPath = "/callback"

// DefaultTokenURL is the token endpoint of `make run`'s public listener.
const DefaultTokenURL = "http://127.0.0.1:8080/oauth/token"

// DemoRedirectURI is the redirect URI the demo partner app gets as an OAuth
// client: the callback page of the demo receiver, which shows the code and
// the command that exchanges it.
func DemoRedirectURI(e Env) string { return "http://" + e.App.Cfg.Demo.Receiver + CallbackPath }

// Callback is the OAuth demo's redirect target on the demo receiver: it
// shows the authorization code (or the error) the browser brought back
// and the curl commands that exchange the code for tokens and call
// userinfo, ready to paste, and prints the same to the receiver's
// terminal.
type Callback struct {
	TokenURL     string    // the token endpoint (…/oauth/token)
	ClientID     string    // the client (the demo app's key)
	ClientSecret string    // empty: the command says where to put it
	RedirectURI  string    // http://<listen address>/callback: what the authorize URL named
	Out          io.Writer // the terminal
	mu           sync.Mutex
}

// codeRE is the shape of a code this server issues (base64url after a
// prefix). Anything else is shown as text and never put into a command,
// since any web page can send a browser here with a crafted query.
var codeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{16,200}$`)

var callbackPage = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gatehouse OAuth demo: callback</title>
<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45}
pre{background:#f3f5f8;border:1px solid #d5dbe3;padding:.8rem;white-space:pre-wrap;word-break:break-all}
.err{color:#a01c00}</style></head><body>
<h1>gatehouse OAuth demo: the browser is back</h1>
{{if .Error}}<p class="err">The authorization server answered <strong>{{.Error}}</strong>{{if .Description}}: {{.Description}}{{end}}.</p>
<p>No code was issued (the request was denied or invalid). Open the authorize URL the demo printed again.</p>
{{else if .Code}}<p>Authorization code: <code>{{.Code}}</code>{{if .State}} (state <code>{{.State}}</code>){{end}}.
It works once, within {{.TTL}}. Next, in a terminal, exchange it for tokens and call userinfo with the access token:</p>
<pre>{{.Commands}}</pre>
{{if not .HasSecret}}<p>Put the demo app's <code>app_secret</code> (the demo banner prints it) in place of APP_SECRET, or start the receiver with <code>--oauth-client-secret</code>.</p>{{end}}
<p>The same commands were printed in the terminal of <code>gatehouse webhook listen</code>.</p>
{{else}}<p class="err">This page expects <code>?code=…</code> (or <code>?error=…</code>) from the authorization server{{if .Odd}}; the code given is not one gatehouse issues, so no command is shown{{end}}.</p>{{end}}
</body></html>
`))

// ServeHTTP shows the page for GET ?code=… or ?error=….
func (c *Callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the OAuth callback page answers GET", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	data := struct {
		Code, State, Error, Description, Commands, TTL string
		HasSecret, Odd                                 bool
	}{State: q.Get("state"), Error: q.Get("error"), Description: q.Get("error_description"), TTL: fmt.Sprintf("%d minutes", int(oauth.CodeTTL.Minutes())), HasSecret: c.ClientSecret != ""}
	switch code := q.Get("code"); {
	case data.Error != "":
	case codeRE.MatchString(code):
		data.Code = code
		data.Commands = c.Commands(code)
	default:
		data.Odd = code != ""
	}
	c.mu.Lock()
	switch {
	case data.Error != "":
		// Both quoted: any web page can send a browser here, and a raw
		// newline or escape sequence would write lines of its choosing
		// (a fake exchange command) into the receiver's terminal.
		fmt.Fprintf(c.Out, "\n── OAuth callback at %s: error %q %q\n", time.Now().Format("15:04:05.000"), data.Error, data.Description)
	case data.Code != "":
		fmt.Fprintf(c.Out, "\n── OAuth callback at %s: code %s; exchange it (once, within %s):\n%s\n", time.Now().Format("15:04:05.000"), data.Code, data.TTL, data.Commands)
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	_ = callbackPage.Execute(w, data)
}

// Commands returns the shell commands that exchange code (a checked code)
// at the token endpoint and call userinfo with the access token.
func (c *Callback) Commands(code string) string {
	sec := "APP_SECRET"
	if c.ClientSecret != "" {
		sec = c.ClientSecret
	}
	userinfo := strings.TrimSuffix(c.TokenURL, "/token") + "/userinfo"
	return fmt.Sprintf("ACCESS=$(curl -s -X POST %s -u %s -d grant_type=authorization_code -d code=%s --data-urlencode %s | sed -E 's/.*\"access_token\":\"([^\"]+)\".*/\\1/')\n"+
		"curl -s %s -H \"Authorization: Bearer $ACCESS\"",
		shellQuote(c.TokenURL), shellQuote(c.ClientID+":"+sec), code, shellQuote("redirect_uri="+c.RedirectURI), shellQuote(userinfo))
}

// CheckTokenURL checks a token endpoint given on the command line.
func CheckTokenURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL of the token endpoint (…/oauth/token)", s)
	}
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
