package app

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
	"gatehouse/internal/identity"
	"gatehouse/internal/kv"
	"gatehouse/internal/oauth"
	"gatehouse/internal/periodic"
	"gatehouse/rest"
	"gatehouse/rest/signin"
)

// authServices are the services of the user-facing authentication
// schemes (OAuth authorization code, signed user tokens), embedded in App.
// Users and UserTokens are fields of adminServices (wire_admin.go), which
// is wired first: disabling a user there revokes the tokens checked here.
type authServices struct {
	// LoginThrottle limits failed logins per username and client address
	// (API and form).
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
	a.LoginThrottle = identity.NewLoginThrottle(a.KV, identity.DefaultLoginAttempts, identity.DefaultLoginUserAttempts, identity.DefaultLoginWindow)
	var err error
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
	if kv.TopologyOf(a.KV) != "" {
		// Shared by every replica, one key per session (any topology);
		// the kv store brings its prefix and timeouts.
		sm.Store = kv.SessionStore{Store: a.KV, Prefix: "session:"}
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
	// Secure is added per request by httpx.Client, to every cookie of a
	// response to an HTTPS request (direct, or through a trusted proxy).
	sm.Cookie.Secure = false
	sm.Cookie.Persist = false
	sm.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		if httpx.ClientGone(r) {
			httpx.Abandon(w, r, a.Log, "session store", err)
			return
		}
		if errs.KindOf(err) == errs.Unavailable {
			httpx.DependencyRefused(r.Context(), a.Log, "session store", err)
		} else {
			a.Log.ErrorContext(r.Context(), "session store", "err", err, "request_id", httpx.GetRequestID(r.Context()))
		}
		w.Header().Set("Retry-After", "1")
		httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unavailable", "error_description": "the session store is unavailable, retry later"})
	}
	return sm
}

// startOAuthPurge deletes expired codes and tokens periodically (at
// start, then every oauthPurgeEvery), like the retention jobs.
func (a *App) startOAuthPurge() {
	a.runInBackground(func(ctx context.Context) {
		periodic.Run(ctx, oauthPurgeEvery, func(ctx context.Context) {
			if n, err := a.OAuth.Purge(ctx); err != nil && ctx.Err() == nil {
				a.Log.Warn("purge expired OAuth codes and tokens", "err", err)
			} else if n > 0 {
				a.Log.Debug("purged expired OAuth codes and tokens", "rows", n)
			}
		})
	})
}

// mountAuth mounts /oauth/…, /login and /api/auth/….
func (a *App) mountAuth(r chi.Router) {
	rest.MountWhole(r, signin.Auth{Users: a.Users, Tokens: a.UserTokens, Throttle: a.LoginThrottle, Log: a.Log}.Routes())
	rest.MountWhole(r, signin.OAuth{Svc: a.OAuth, Users: a.Users, Throttle: a.LoginThrottle, Sessions: a.Sessions, Log: a.Log, Issuer: strings.TrimRight(a.Cfg.Server.PublicURL, "/")}.Routes())
}
