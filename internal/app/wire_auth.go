package app

import (
	"context"
	"net/http"
	"time"

	"github.com/alexedwards/scs/goredisstore"
	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"gatehouse/internal/httpx"
	"gatehouse/internal/identity"
	"gatehouse/internal/kv"
	"gatehouse/internal/oauth"
	"gatehouse/rest"
)

// authServices are the services of the user-facing authentication
// schemes (OAuth authorization code, signed user tokens), embedded in App.
// Users (identity.Users) is a field of adminServices (wire_admin.go),
// which is wired first; authentication uses the same service.
type authServices struct {
	// UserTokens issues and verifies signed user tokens (JWT) and keeps
	// their deny-list.
	UserTokens *identity.TokenService
	// LoginThrottle limits failed logins per username (API and form).
	LoginThrottle *identity.LoginThrottle
	// OAuth is the authorization server (clients are partner apps).
	OAuth *oauth.Service
	// Sessions are the browser sessions of the authorization flow:
	// in Redis when configured, so any replica continues a flow.
	Sessions *scs.SessionManager
}

// Session settings of the browser flow.
const (
	sessionCookie   = "gatehouse_session"
	sessionLifetime = 12 * time.Hour
	sessionIdle     = 1 * time.Hour
	oauthPurgeEvery = 10 * time.Minute
)

// wireAuth builds the user, JWT and OAuth services.
func (a *App) wireAuth(ctx context.Context) error {
	if a.Users == nil { // wireAdmin runs first and sets it
		a.Users = identity.NewUsers(a.DB.Client)
	}
	tokens, err := identity.NewTokenService(a.Cfg.JWTSecret, a.Cfg.JWTTTL, a.KV)
	if err != nil {
		return err
	}
	a.UserTokens = tokens
	a.LoginThrottle = identity.NewLoginThrottle(a.KV, identity.DefaultLoginAttempts, identity.DefaultLoginWindow)
	if a.OAuth, err = oauth.NewService(a.DB.Client, a.Cfg.MasterKey); err != nil {
		return err
	}
	a.Sessions = a.newSessions()
	a.startOAuthPurge()
	return nil
}

// newSessions configures scs: Redis store (sharing the kv client) when
// Redis is configured, else the in-process store.
func (a *App) newSessions() *scs.SessionManager {
	// scs.New starts its in-process store (memstore, expired sessions
	// swept every minute). That is the store of a single replica. Its sweep
	// goroutine lives as long as the process: memstore.StopCleanup races
	// with the goroutine's start, so it is not called.
	sm := scs.New()
	if rc, ok := kv.RedisClient(a.KV); ok {
		// Shared by every replica; the kv client brings its timeouts.
		sm.Store = goredisstore.NewWithPrefix(rc, a.Cfg.RedisKeyPrefix+"session:")
	}
	// Only a hash of the session token is used as the store key.
	sm.HashTokenInStore = true
	sm.Lifetime = sessionLifetime
	sm.IdleTimeout = sessionIdle
	sm.Cookie.Name = sessionCookie
	sm.Cookie.HttpOnly = true
	// Lax: the cookie comes along when another site sends the user to
	// /oauth/authorize (a top-level GET), not on cross-site POSTs.
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Secure = a.Cfg.TLSCert != ""
	sm.Cookie.Persist = false
	sm.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		a.Log.ErrorContext(r.Context(), "session store", "err", err, "request_id", httpx.GetRequestID(r.Context()))
		w.Header().Set("Retry-After", "1")
		httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "temporarily_unavailable", "error_description": "the session store is unavailable, retry later"})
	}
	return sm
}

// startOAuthPurge deletes expired codes and tokens periodically.
func (a *App) startOAuthPurge() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(oauthPurgeEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if n, err := a.OAuth.Purge(ctx); err != nil {
					a.Log.Warn("purge expired OAuth codes and tokens", "err", err)
				} else if n > 0 {
					a.Log.Debug("purged expired OAuth codes and tokens", "rows", n)
				}
			}
		}
	}()
	a.stops = append(a.stops, func(sctx context.Context) error {
		cancel()
		select {
		case <-done:
		case <-sctx.Done():
		}
		return nil
	})
}

// mountAuth mounts /oauth/…, /login and /api/auth/….
func (a *App) mountAuth(r chi.Router) {
	rest.Auth{Users: a.Users, Tokens: a.UserTokens, Throttle: a.LoginThrottle, Log: a.Log}.Mount(r)
	rest.OAuth{Svc: a.OAuth, Users: a.Users, Throttle: a.LoginThrottle, Sessions: a.Sessions, Log: a.Log}.Mount(r)
}
