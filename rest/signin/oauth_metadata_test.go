package signin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// discover fetches the authorization server metadata of issuer as RFC 8414
// section 3 tells a client to: from issuer + /.well-known/oauth-authorization-server,
// refusing a document whose issuer is not the one asked for (section 3.3).
func discover(c *http.Client, issuer string) (map[string]any, error) {
	resp, err := c.Get(strings.TrimRight(issuer, "/") + "/.well-known/oauth-authorization-server")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil, fmt.Errorf("metadata: HTTP %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, err
	}
	if m["issuer"] != issuer {
		return nil, fmt.Errorf("metadata issuer %v, asked %s", m["issuer"], issuer)
	}
	return m, nil
}

func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestOAuthMetadata: /.well-known/oauth-authorization-server (RFC 8414)
// names this server's endpoints and what it supports; a golang.org/x/oauth2
// client configured from it alone (endpoints, client authentication, PKCE,
// scopes) completes the flow, and revokes and introspects at the
// advertised endpoints.
func TestOAuthMetadata(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		ctx := context.Background()
		// A disabled app's scopes are not advertised.
		off, _, err := f.App.Partners.Create(ctx, partner.CreateInput{AppName: "off", Scopes: []string{"secret:scope"}})
		if err != nil {
			t.Fatal(err)
		}
		disabled := partner.Disabled
		if _, err := f.App.Partners.Update(ctx, off.ID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		m, err := discover(f.Client, f.PublicURL)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"authorization_endpoint":                        f.PublicURL + "/oauth/authorize",
			"token_endpoint":                                f.PublicURL + "/oauth/token",
			"revocation_endpoint":                           f.PublicURL + "/oauth/revoke",
			"introspection_endpoint":                        f.PublicURL + "/oauth/introspect",
			"response_types_supported":                      []string{"code"},
			"response_modes_supported":                      []string{"query"},
			"grant_types_supported":                         []string{"authorization_code", "refresh_token"},
			"code_challenge_methods_supported":              []string{"S256"},
			"token_endpoint_auth_methods_supported":         []string{"client_secret_basic", "client_secret_post"},
			"revocation_endpoint_auth_methods_supported":    []string{"client_secret_basic", "client_secret_post"},
			"introspection_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
			"scopes_supported":                              []string{"orders:read", "profile"},
		}
		for k, w := range want {
			got := m[k]
			if ws, ok := w.([]string); ok {
				if got == nil || !slices.Equal(strs(got), ws) {
					t.Errorf("%s = %v, want %v", k, got, ws)
				}
			} else if got != w {
				t.Errorf("%s = %v, want %v", k, got, w)
			}
		}
		if len(m) != len(want)+1 {
			t.Errorf("%d members, want %d: %v", len(m), len(want)+1, m)
		}

		for _, method := range strs(m["token_endpoint_auth_methods_supported"]) {
			t.Run(method, func(t *testing.T) {
				style := map[string]oauth2.AuthStyle{"client_secret_basic": oauth2.AuthStyleInHeader, "client_secret_post": oauth2.AuthStyleInParams}[method]
				conf := &oauth2.Config{
					ClientID: f.app.AppKey, ClientSecret: f.secret, RedirectURL: f.redirect,
					Endpoint: oauth2.Endpoint{AuthURL: m["authorization_endpoint"].(string), TokenURL: m["token_endpoint"].(string), AuthStyle: style},
					Scopes:   strs(m["scopes_supported"]),
				}
				var opts []oauth2.AuthCodeOption
				verifier := oauth2.GenerateVerifier()
				if slices.Contains(strs(m["code_challenge_methods_supported"]), "S256") {
					opts = append(opts, oauth2.S256ChallengeOption(verifier))
				}
				state := secret.RandomToken("", 16)
				c := auBrowser(t)
				loc := auDo(t, c, "GET", conf.AuthCodeURL(state, opts...), nil).location(t)
				f.signIn(t, c, "alice", f.password, loc.Query().Get("next"))
				loc = f.confirm(t, c, requestID(t, loc), true).location(t)
				if loc.Query().Get("state") != state {
					t.Fatalf("callback %s", loc)
				}
				octx := context.WithValue(ctx, oauth2.HTTPClient, f.Client)
				tok, err := conf.Exchange(octx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
				if err != nil {
					t.Fatalf("exchange: %v", err)
				}
				if tok.Extra("scope") != "orders:read profile" {
					t.Fatalf("scope %v", tok.Extra("scope"))
				}
				// Introspect, revoke, introspect at the advertised endpoints,
				// authenticating as advertised.
				call := func(endpoint, token string) (int, map[string]any) {
					form := url.Values{"token": {token}}
					if method == "client_secret_post" {
						form.Set("client_id", f.app.AppKey)
						form.Set("client_secret", f.secret)
					}
					req, _ := http.NewRequest("POST", m[endpoint].(string), strings.NewReader(form.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					if method == "client_secret_basic" {
						req.SetBasicAuth(url.QueryEscape(f.app.AppKey), url.QueryEscape(f.secret))
					}
					resp, err := f.Client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					var body map[string]any
					_ = json.NewDecoder(resp.Body).Decode(&body)
					return resp.StatusCode, body
				}
				if st, body := call("introspection_endpoint", tok.AccessToken); st != 200 || body["active"] != true {
					t.Fatalf("introspect: %d %v", st, body)
				}
				if st, _ := call("revocation_endpoint", tok.AccessToken); st != 200 {
					t.Fatalf("revoke: %d", st)
				}
				if st, body := call("introspection_endpoint", tok.AccessToken); st != 200 || body["active"] != false {
					t.Fatalf("introspect after revoke: %d %v", st, body)
				}
			})
		}
	})
}

// TestOAuthMetadataIssuer: with GATEHOUSE_PUBLIC_URL the issuer and the
// endpoints are that URL's whatever the Host; without it, the request's
// scheme and host.
func TestOAuthMetadataIssuer(t *testing.T) {
	f := auSetup(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) { c.Server.PublicURL = "https://gatehouse.example.com/" })
	req, _ := http.NewRequest("GET", f.PublicURL+"/.well-known/oauth-authorization-server", nil)
	req.Host = "evil.example"
	resp, err := f.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m["issuer"] != "https://gatehouse.example.com" || m["token_endpoint"] != "https://gatehouse.example.com/oauth/token" {
		t.Fatalf("metadata %v", m)
	}
}

// TestOAuthMetadataCaching: metadata built from the request's Host (no
// GATEHOUSE_PUBLIC_URL) is neither cached nor shared across hosts: a
// stranger's Host gets a document no shared cache keeps. With a public URL
// the document is the same for every Host and may be cached.
func TestOAuthMetadataCaching(t *testing.T) {
	for _, c := range []struct {
		name, publicURL, cache, vary string
	}{
		{"from the Host header", "", "no-store", "Host"},
		{"pinned by GATEHOUSE_PUBLIC_URL", "https://gatehouse.example.com", "public, max-age=300", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := auSetup(t, testenv.Backend{Name: "sqlite"}, func(cfg *config.Config) { cfg.Server.PublicURL = c.publicURL })
			req, _ := http.NewRequest("GET", f.PublicURL+"/.well-known/oauth-authorization-server", nil)
			req.Host = "evil.example"
			resp, err := f.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Cache-Control"); got != c.cache {
				t.Errorf("Cache-Control %q, want %q", got, c.cache)
			}
			if got := resp.Header.Get("Vary"); got != c.vary {
				t.Errorf("Vary %q, want %q", got, c.vary)
			}
		})
	}
}
