// Package app wires configuration, storage and services into the two HTTP
// handlers, and runs the listeners with a graceful shutdown.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gatehouse/graph"
	"gatehouse/internal/config"
	"gatehouse/internal/httpx"
	"gatehouse/internal/kv"
	"gatehouse/internal/store"
	"gatehouse/internal/ticket"
	"gatehouse/rest"
)

// App is a fully wired gatehouse process.
type App struct {
	Cfg config.Config
	Log *slog.Logger
	DB  *store.DB
	KV  kv.Store

	Tickets *ticket.Service

	partnerServices   // wire_partner.go
	adminServices     // wire_admin.go
	webhookServices   // wire_webhooks.go
	inventoryServices // wire_inventory.go
	authServices      // wire_auth.go

	// Public and Admin are the handlers of the two listeners.
	Public http.Handler
	Admin  http.Handler

	// background work started by Start and stopped by Close.
	stops []func(context.Context) error

	closeOnce sync.Once
	closeErr  error

	// draining is set when shutdown begins: /readyz answers 503 from then on.
	draining atomic.Bool
}

// New opens storage, migrates, and builds every service and both handlers.
// cfg must have been resolved (config.Resolve).
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*App, error) {
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	var kvOpts []kv.Option
	if cfg.RedisKeyPrefix != "" {
		kvOpts = append(kvOpts, kv.WithPrefix(cfg.RedisKeyPrefix))
	}
	store, err := kv.Open(ctx, cfg.RedisURL, kvOpts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open key-value store: %w", err)
	}
	a := &App{Cfg: cfg, Log: log, DB: db, KV: store}
	a.Tickets = ticket.NewService(db.Client)
	// Each capability wires its services in its own file (wire_*.go).
	for _, wire := range []func(context.Context) error{a.wirePartner, a.wireInventory, a.wireAdmin, a.wireWebhooks, a.wireAuth} {
		if err := wire(ctx); err != nil {
			_ = a.Close(ctx)
			return nil, err
		}
	}
	a.Public = a.publicHandler()
	a.Admin = a.adminHandler()
	return a, nil
}

func (a *App) publicHandler() http.Handler {
	r := chi.NewRouter()
	r.Use(httpx.RequestID, httpx.Logger(a.Log, "public"), httpx.Recoverer(a.Log), httpx.CapBody)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", a.ready)
	r.Mount("/api/tickets", rest.Tickets{Svc: a.Tickets, Log: a.Log}.Routes())
	a.mountPartner(r)
	a.mountAuth(r)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteError(w, http.StatusNotFound, "not_found", "no such resource")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed here")
	})
	return r
}

func (a *App) adminHandler() http.Handler {
	r := chi.NewRouter()
	r.Use(httpx.RequestID, httpx.Logger(a.Log, "admin"), httpx.Recoverer(a.Log), httpx.LimitBody)
	a.mountPlayground(r)
	gql := graph.NewHandler(a.resolver(), a.Log)
	r.Handle("/graphql", a.adminGuard(gql))
	r.Handle("/metrics", promhttp.Handler())
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return r
}

// ready answers 200 when the database and the key-value store answer.
func (a *App) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "kv": "ok"}
	status := http.StatusOK
	if a.draining.Load() {
		checks["status"] = "shutting_down"
		status = http.StatusServiceUnavailable
	}
	if err := a.DB.Ping(ctx); err != nil {
		checks["database"] = "unavailable"
		status = http.StatusServiceUnavailable
	}
	if err := a.KV.Ping(ctx); err != nil {
		checks["kv"] = "unavailable"
		status = http.StatusServiceUnavailable
	}
	httpx.WriteJSON(w, status, checks)
}

// Start launches background work (webhook dispatch, counter flushing).
func (a *App) Start(ctx context.Context) error {
	a.startWebhooks(ctx)
	return nil
}

// Close stops background work (in reverse order of start), flushes, and
// releases storage. It is safe to call more than once: later calls return
// the first call's result.
func (a *App) Close(ctx context.Context) error {
	a.closeOnce.Do(func() {
		var errs []error
		for i := len(a.stops) - 1; i >= 0; i-- {
			errs = append(errs, a.stops[i](ctx))
		}
		errs = append(errs, a.KV.Close(), a.DB.Close())
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}
