package signin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// TestOAuthThirdPartyClient drives the flow with golang.org/x/oauth2, a
// client library we did not write: PKCE, the code exchange with both
// client authentication styles, a userinfo call with the library's HTTP
// client, and a refresh the library performs by itself.
func TestOAuthThirdPartyClient(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		for _, style := range []struct {
			name  string
			style oauth2.AuthStyle
		}{{"AuthStyleInParams", oauth2.AuthStyleInParams}, {"AuthStyleInHeader", oauth2.AuthStyleInHeader}} {
			t.Run(style.name, func(t *testing.T) {
				conf := &oauth2.Config{
					ClientID:     f.app.AppKey,
					ClientSecret: f.secret,
					Endpoint: oauth2.Endpoint{
						AuthURL:   f.PublicURL + "/oauth/authorize",
						TokenURL:  f.PublicURL + "/oauth/token",
						AuthStyle: style.style,
					},
					RedirectURL: f.redirect,
					Scopes:      []string{"profile", "orders:read"},
				}
				verifier := oauth2.GenerateVerifier()
				state := secret.RandomToken("", 16)
				authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))

				// The user agent: authorize, sign in, approve.
				c := auBrowser(t)
				loc := auDo(t, c, "GET", authURL, nil).location(t)
				if loc.Path != "/login" {
					t.Fatalf("authorize: %s", loc)
				}
				f.signIn(t, c, "alice", f.password, loc.Query().Get("next"))
				loc = f.confirm(t, c, requestID(t, loc), true).location(t)
				if loc.Query().Get("state") != state {
					t.Fatalf("state %q, want %q", loc.Query().Get("state"), state)
				}

				ctx := context.WithValue(context.Background(), oauth2.HTTPClient, f.Client)
				tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
				if err != nil {
					t.Fatalf("exchange: %v", err)
				}
				if tok.Type() != "Bearer" || tok.RefreshToken == "" || tok.Extra("scope") != "profile orders:read" ||
					time.Until(tok.Expiry) < 7190*time.Second || time.Until(tok.Expiry) > 7200*time.Second {
					t.Fatalf("token %+v (expires in %v)", tok, time.Until(tok.Expiry))
				}
				info := userinfoWith(t, conf.Client(ctx, tok), f.PublicURL)
				if info["sub"] != strconv.Itoa(f.user.ID) || info["username"] != "alice" || info["client_id"] != f.app.AppKey {
					t.Fatalf("userinfo %v", info)
				}

				// The library refreshes an expired token on its own.
				old := *tok
				tok.Expiry = time.Now().Add(-time.Minute)
				refreshed, err := conf.TokenSource(ctx, tok).Token()
				if err != nil {
					t.Fatalf("refresh: %v", err)
				}
				if refreshed.AccessToken == old.AccessToken || refreshed.RefreshToken == old.RefreshToken {
					t.Fatal("refresh did not rotate the pair")
				}
				if info := userinfoWith(t, conf.Client(ctx, refreshed), f.PublicURL); info["username"] != "alice" {
					t.Fatalf("userinfo after refresh %v", info)
				}
				f.userinfo(t, old.AccessToken).expectError(t, 401, "invalid_token")

				// A wrong secret surfaces as the library's RetrieveError.
				bad := *conf
				bad.ClientSecret = "wrong"
				_, err = bad.Exchange(ctx, "ghc_whatever", oauth2.VerifierOption(verifier))
				re, ok := err.(*oauth2.RetrieveError)
				if !ok || re.Response.StatusCode != 401 || re.ErrorCode != "invalid_client" {
					t.Fatalf("wrong secret: %v", err)
				}
			})
		}
	})
}

func userinfoWith(t *testing.T, c *http.Client, base string) map[string]any {
	t.Helper()
	resp, err := c.Get(base + "/oauth/userinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("userinfo: HTTP %d", resp.StatusCode)
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}
