package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"gatehouse/graph"
	"gatehouse/graph/guard"
	"gatehouse/graph/playground"
	"gatehouse/internal/apikey"
	"gatehouse/internal/audit"
	"gatehouse/internal/identity"
	"gatehouse/internal/portal"
)

// adminServices are the admin side's services, embedded in App.
type adminServices struct {
	// PortalLinks mints (createPortalLink) and redeems (/portal/enter)
	// partner portal links.
	PortalLinks *portal.Links
	// APIKeys creates, disables and checks admin API keys.
	APIKeys *apikey.Service
	// KeyUsage batches the counting of accepted API key uses.
	KeyUsage *apikey.Counter
	// Users creates, disables and enables users and resets their
	// passwords (revoking their tokens through UserTokens).
	Users *identity.Users
	// UserTokens issues and verifies signed user tokens (JWT), keeps their
	// deny-list and the per-user revocation marks.
	UserTokens *identity.TokenService
	// Revocations are the durable logouts and user revocations (in the
	// database) and this process's mirror of them.
	Revocations *identity.Revocations
	// Audit records every admin mutation and purges old events.
	Audit *audit.Service
}

// BootstrapAPIKeyName names the key GATEHOUSE_BOOTSTRAP_API_KEY creates.
const BootstrapAPIKeyName = "bootstrap (GATEHOUSE_BOOTSTRAP_API_KEY)"

// wireAdmin builds the admin-side services (API keys, users and their
// tokens, the audit log) and makes sure the bootstrap API key exists.
func (a *App) wireAdmin(ctx context.Context) error {
	a.KeyUsage = apikey.NewCounter(a.DB.Client, a.Log, apikey.DefaultFlushInterval)
	// Keys are checked against this process's mirror of their rows,
	// dropped at every change of a key on any replica (apikey.Mirror).
	keys, err := apikey.NewMirror(ctx, a.DB, a.KV, a.Log)
	if err != nil {
		return err
	}
	a.runInBackground(keys.Run)
	a.APIKeys = apikey.NewService(a.DB.Client, a.KeyUsage, apikey.WithMirror(keys))
	// The database is the record of logouts and user revocations; every
	// token check reads this process's mirror of it, loaded before serving.
	a.Revocations = identity.NewRevocations(a.DB, a.Log,
		identity.WithRevocationPoll(0, max(identity.DefaultRevocationGapWait, 3*a.Cfg.Server.RequestTimeout)))
	if err := a.Revocations.Load(ctx); err != nil {
		return fmt.Errorf("load token revocations: %w", err)
	}
	a.runInBackground(a.Revocations.Run)
	tokens, err := identity.NewTokenService(a.Cfg.JWTSecret, a.Cfg.Auth.JWTTTL, a.KV, identity.WithRevocations(a.Revocations))
	if err != nil {
		return err
	}
	a.UserTokens = tokens
	a.Users = identity.NewUsers(a.DB.Client, identity.WithTokens(tokens))
	if a.Audit, err = audit.NewService(a.DB, a.Log, audit.Options{Retention: a.Cfg.Audit.Retention}); err != nil {
		return err
	}
	if a.Cfg.Auth.BootstrapAPIKey != "" {
		if len(a.Cfg.Auth.BootstrapAPIKey) < apikey.RecommendedKeyLen {
			a.Log.Warn("GATEHOUSE_BOOTSTRAP_API_KEY is short and easy to guess; use at least 16 random characters", "length", len(a.Cfg.Auth.BootstrapAPIKey))
		}
		if _, err := a.APIKeys.Ensure(ctx, BootstrapAPIKeyName, a.Cfg.Auth.BootstrapAPIKey); err != nil {
			return fmt.Errorf("GATEHOUSE_BOOTSTRAP_API_KEY: %w", err)
		}
	}
	a.KeyUsage.Start()
	a.stops = append(a.stops, a.KeyUsage.Close)
	return nil
}

// resolver is the root GraphQL resolver with every service it reaches.
func (a *App) resolver() *graph.Resolver {
	return &graph.Resolver{
		Client:    a.DB.Client,
		Partners:  a.Partners,
		Orders:    a.Orders,
		APIKeys:   a.APIKeys,
		Users:     a.Users,
		Webhooks:  a.Webhooks,
		Inventory: a.Inventory,
		Versions:  a.APIVersions,
		Usage:     a.Usage,
		Payments:  a.Payments,
		Audit:     a.Audit,
		Tracing:   a.Cfg.Tracing,

		PortalLinks: a.portalLinks(),
		PublicURL:   a.portalBase(),
	}
}

// adminGuard is the single place where authentication of the admin
// GraphQL endpoint plugs in: an enabled API key in X-API-Key.
func (a *App) adminGuard(next http.Handler) http.Handler {
	return guard.APIKeyGuard(a.APIKeys, a.Log)(next)
}

// startAudit runs the audit retention job until Close.
func (a *App) startAudit() { a.runInBackground(a.Audit.Start) }

// mountPlayground serves the GraphiQL Playground at /, its files and icon.
func (a *App) mountPlayground(r chi.Router) {
	r.Method(http.MethodGet, "/", playground.PlaygroundPage("gatehouse admin", "/graphql"))
	r.Method(http.MethodGet, playground.FaviconPath, playground.Favicon())
	r.Method(http.MethodGet, "/favicon.ico", playground.Favicon())
	r.Method(http.MethodGet, playground.PlaygroundAssetsPath+"*", playground.PlaygroundAssets())
}
