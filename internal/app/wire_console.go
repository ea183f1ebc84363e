package app

import (
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"gatehouse/internal/console"
	"gatehouse/internal/kv"
	"gatehouse/internal/secret"
)

// Console sessions: a working day at most, ended after half an hour
// without a request.
const (
	consoleSessionLifetime = 8 * time.Hour
	consoleSessionIdle     = 30 * time.Minute
)

// consoleSessions are the admin console's sessions: a cookie and a store
// of their own (not the public listener's OAuth sessions), kept in Redis
// when it is configured (every replica, and across restarts) and in this
// process otherwise (a restart signs everyone out; see docs/console.md).
func (a *App) consoleSessions() *scs.SessionManager {
	// Strict: no other site can make the browser send it, not even a link.
	return a.pageSessions("console-session:", console.CookieName, console.Base, http.SameSiteStrictMode, consoleSessionLifetime)
}

// pageSessions are the sessions of a set of web pages (the console's, the
// portal's): a cookie of their own (name, scoped to path), a store of
// their own (keys under prefix in Redis when it is configured, else this
// process), only a hash of the token as the key, HttpOnly, ended after
// consoleSessionIdle without a request. Secure is added per request by
// httpx.Client on HTTPS.
func (a *App) pageSessions(prefix, name, path string, sameSite http.SameSite, lifetime time.Duration) *scs.SessionManager {
	sm := scs.New()
	if kv.TopologyOf(a.KV) != "" {
		sm.Store = kv.SessionStore{Store: a.KV, Prefix: prefix}
	}
	sm.HashTokenInStore = true
	sm.Lifetime = lifetime
	sm.IdleTimeout = consoleSessionIdle
	sm.Cookie.Name = name
	sm.Cookie.Path = path
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = sameSite
	sm.Cookie.Persist = false
	sm.ErrorFunc = a.Sessions.ErrorFunc
	return sm
}

// mountConsole serves the admin console at /console/ over gql, the
// guarded GraphQL handler.
func (a *App) mountConsole(r chi.Router, gql http.Handler) error {
	sealer, err := secret.NewSealer(a.Cfg.MasterKey)
	if err != nil {
		return err
	}
	c, err := console.New(console.Config{GraphQL: gql, Sessions: a.consoleSessions(), Sealer: sealer, Log: a.Log})
	if err != nil {
		return err
	}
	r.Get("/console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, console.Base, http.StatusMovedPermanently)
	})
	r.Mount("/console", c.Routes())
	return nil
}
