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
	sm := scs.New()
	if kv.TopologyOf(a.KV) != "" {
		sm.Store = kv.SessionStore{Store: a.KV, Prefix: "console-session:"}
	}
	sm.HashTokenInStore = true
	sm.Lifetime = consoleSessionLifetime
	sm.IdleTimeout = consoleSessionIdle
	sm.Cookie.Name = console.CookieName
	sm.Cookie.Path = console.Base
	sm.Cookie.HttpOnly = true
	// Strict: no other site can make the browser send it, not even a link.
	sm.Cookie.SameSite = http.SameSiteStrictMode
	// Secure is added per request by httpx.Client on HTTPS.
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
