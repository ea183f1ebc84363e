// Package app wires configuration, storage and services into the two HTTP
// handlers, and runs the listeners with a graceful shutdown.
package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gatehouse/graph"
	"gatehouse/internal/config"
	"gatehouse/internal/depstate"
	"gatehouse/internal/httpx"
	"gatehouse/internal/kv"
	"gatehouse/internal/partner/admitstore"
	"gatehouse/internal/store"
	"gatehouse/internal/ticket"
	"gatehouse/rest/publish"
	"gatehouse/rest/tickets"
)

// App is a fully wired gatehouse process.
type App struct {
	Cfg config.Config
	Log *slog.Logger
	DB  *store.DB
	KV  kv.Store
	// Admission is the signed-request gate's store (nonces, rate windows,
	// the replay memory) over KV's connection.
	Admission admitstore.Store

	Tickets *ticket.Service

	partnerServices   // wire_partner.go
	adminServices     // wire_admin.go
	webhookServices   // wire_webhooks.go
	inventoryServices // wire_inventory.go
	authServices      // wire_auth.go
	paymentServices   // wire_payments.go

	// Shed is the load shedding of the two listeners (wire_shed.go).
	Shed Shedding

	// Public and Admin are the handlers of the two listeners.
	Public http.Handler
	Admin  http.Handler

	// background work started by Start and stopped by Close.
	stops []func(context.Context) error

	closeOnce sync.Once
	closeErr  error

	// started is set once Start has run, draining when shutdown begins:
	// /readyz answers 503 before the one and after the other.
	started, draining atomic.Bool
	// deps holds the dependencies' states and sums up the requests they
	// fail (one ERROR per state change, one summary line a second).
	deps *depstate.Tracker
	// recheckAt is when a request failing on a dependency believed ok
	// last triggered a readiness check (Unix ns; suspectDependency).
	recheckAt atomic.Int64
	// readyCheckedAt is when the readiness checks last ran (Unix ns).
	readyCheckedAt atomic.Int64
}

// maxClockOffset is how far the database's clock may be from this host's
// before New logs an error (the deadline checks on Postgres use it).
const maxClockOffset = time.Second

// New opens storage, migrates, and builds every service and both handlers.
// cfg must have been resolved (config.Resolve).
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*App, error) {
	// The version lifecycle is checked against the versions this build
	// serves before anything is opened.
	versions, err := apiVersions(cfg)
	if err != nil {
		return nil, err
	}
	dbOpts := StoreOptions(cfg)
	if tp := cfg.Tracing.ChildOnly(); tp != nil {
		dbOpts = append(dbOpts, store.WithTracing(tp))
	}
	db, err := store.Open(ctx, cfg.Database.URL, dbOpts...)
	if err != nil {
		return nil, err
	}
	if db.ThroughPooler() {
		if cfg.Database.DirectURL == "" {
			log.Warn("Postgres is reached through a connection pooler and GATEHOUSE_DATABASE_DIRECT_URL is not set: "+
				"there is no session connection to LISTEN on, so webhook deliveries queued by other replicas wait "+
				"for a poll (every 500 ms) instead of being woken by NOTIFY at once; the migration lock is held by "+
				"an open transaction. Set GATEHOUSE_DATABASE_DIRECT_URL to the database without the pooler",
				"lost", "instant cross-replica webhook wake-ups (LISTEN/NOTIFY)")
		} else {
			log.Info("Postgres is reached through a connection pooler: statements are not prepared by name; LISTEN and the migration lock use GATEHOUSE_DATABASE_DIRECT_URL")
		}
	}
	rep, err := db.MigrateReport(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	if rep.Changed() {
		log.Info("database schema migrated", "result", rep.String())
	} else {
		log.Info("database schema is up to date", "version", rep.Version)
	}
	if off, err := db.ClockOffset(ctx); err == nil && (off > maxClockOffset || off < -maxClockOffset) {
		log.Error("the database server's clock differs from this host's; synchronise both (NTP)",
			"database_ahead_by", off.String(),
			"effect", "single writes and deductions are checked against their request's deadline on the database's clock: "+
				"a database clock ahead by more than the request timeout makes them fail with 503")
	}
	kvOpts, err := kvOptions(cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	store, err := kv.Open(ctx, cfg.Redis.URL, kvOpts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open key-value store: %w", err)
	}
	admission, err := admitstore.Open(ctx, store, admitOptions(cfg, log)...)
	if err != nil {
		store.Close()
		db.Close()
		return nil, fmt.Errorf("open admission store: %w", err)
	}
	a := &App{Cfg: cfg, Log: log, DB: db, KV: store, Admission: admission, deps: depstate.New(log)}
	a.deps.OnSuspect(a.suspectDependency)
	a.APIVersions = versions
	if err := a.checkEviction(ctx); err != nil {
		_ = a.Close(ctx)
		return nil, err
	}
	if !cfg.Embedded() && cfg.TLS.Cert == "" && len(cfg.TrustedProxies) == 0 {
		// A production database but nothing that says how HTTPS is done:
		// signed partner requests and passwords would cross in clear.
		log.Warn("partner and sign-in traffic must arrive over HTTPS: set GATEHOUSE_TLS_CERT/GATEHOUSE_TLS_KEY, or GATEHOUSE_TRUSTED_PROXIES for the TLS-terminating proxy in front")
	}
	warnSingleReplicaState(cfg, log)
	a.Tickets = ticket.NewService(db.Client)
	// Each capability wires its services in its own file (wire_*.go).
	for _, wire := range []func(context.Context) error{a.wirePartner, a.wireInventory, a.wireAdmin, a.wireWebhooks, a.wireAuth, a.wirePayments} {
		if err := wire(ctx); err != nil {
			_ = a.Close(ctx)
			return nil, err
		}
	}
	a.Shed = a.newShedding()
	if a.Public, err = a.publicHandler(); err != nil {
		_ = a.Close(ctx)
		return nil, err
	}
	if a.Admin, err = a.adminHandler(); err != nil {
		_ = a.Close(ctx)
		return nil, err
	}
	return a, nil
}

// StoreOptions are the database settings of cfg beyond the URL.
func StoreOptions(cfg config.Config) []store.Option {
	return []store.Option{store.WithSQLiteSync(cfg.Database.SQLiteSync), store.WithDirectURL(cfg.Database.DirectURL),
		store.WithPoolSizes(cfg.Database.MaxConns, cfg.Database.ReadConns)}
}

// ReplayFile is where the in-process store saves its replay memory at a
// graceful stop and loads it from at the next start.
const ReplayFile = "replay-memory.bin"

// admitOptions are the admission store's options from cfg.
func admitOptions(cfg config.Config, log *slog.Logger) []admitstore.Option {
	opts := []admitstore.Option{admitstore.WithLogger(log), admitstore.WithNonceMemoryMax(cfg.Redis.NonceMemoryMax)}
	if cfg.Redis.URL == "" {
		opts = append(opts, admitstore.WithReplayFile(filepath.Join(cfg.Database.DataDir, ReplayFile)))
	}
	return opts
}

// kvOptions are the key-value store's options from cfg.
func kvOptions(cfg config.Config) ([]kv.Option, error) {
	var opts []kv.Option
	if cfg.Redis.KeyPrefix != "" {
		opts = append(opts, kv.WithPrefix(cfg.Redis.KeyPrefix))
	}
	if tp := cfg.Tracing.ChildOnly(); tp != nil {
		opts = append(opts, kv.WithTracing(tp))
	}
	if cfg.Redis.CA != "" {
		pem, err := os.ReadFile(cfg.Redis.CA)
		if err != nil {
			return nil, fmt.Errorf("GATEHOUSE_REDIS_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("GATEHOUSE_REDIS_CA: %s holds no PEM certificate", cfg.Redis.CA)
		}
		opts = append(opts, kv.WithRootCAs(pool))
	}
	return opts, nil
}

func (a *App) publicHandler() (http.Handler, error) {
	r := chi.NewRouter()
	r.Use(httpx.RequestID, httpx.Client(a.Cfg.TrustedProxies), httpx.Trace(a.Cfg.Tracing, "public", httpx.Outside), httpx.Logger(a.Log, "public"), httpx.Recoverer(a.Log),
		a.publicShedding(), httpx.Refusals(a.deps), httpx.Deadline(a.Cfg.Server.RequestTimeout), httpx.CapBody)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", a.ready)
	r.Mount("/api/tickets", tickets.Tickets{Svc: a.Tickets, Log: a.Log}.Routes())
	a.mountPartner(r)
	a.mountAuth(r)
	if err := a.mountPortal(r); err != nil {
		return nil, err
	}
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteError(w, http.StatusNotFound, "not_found", "no such resource")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed here")
	})
	return r, nil
}

func (a *App) adminHandler() (http.Handler, error) {
	r := chi.NewRouter()
	r.Use(httpx.RequestID, httpx.Client(a.Cfg.TrustedProxies), httpx.Trace(a.Cfg.Tracing, "admin", httpx.Inside), httpx.Logger(a.Log, "admin"), httpx.Recoverer(a.Log),
		a.adminShedding(), httpx.Refusals(a.deps), httpx.Deadline(a.Cfg.Server.RequestTimeout))
	// /graphql bounds its body itself, after the API key is checked, so
	// that an admin key's oversized mutation is audited (graph.NewHandler).
	gql := a.adminGuard(graph.NewHandler(a.resolver(), a.Log))
	r.Handle("/graphql", gql)
	// The publish API bounds its bodies itself (larger than 64 KiB: an
	// event's payload may take 256 KiB).
	r.With(a.adminGuard).Mount("/api/events", publish.Events{Svc: a.Webhooks, Log: a.Log}.Routes())
	if err := a.mountConsole(r, gql); err != nil {
		return nil, err
	}
	r.Group(func(r chi.Router) {
		r.Use(httpx.LimitBody)
		a.mountPlayground(r)
		r.Handle("/metrics", promhttp.Handler())
		r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		})
	})
	return r, nil
}

// Start launches background work (webhook dispatch, counter flushing,
// the audit retention job).
func (a *App) Start(ctx context.Context) error {
	a.runInBackground(a.deps.Run)
	a.started.Store(true)
	a.checkReadiness(ctx)
	a.runInBackground(a.refreshReadiness)
	a.startWebhooks(ctx)
	a.startAudit()
	return nil
}

// runInBackground runs job in its own goroutine until Close, which
// cancels its context and waits for it to return (within Close's deadline).
func (a *App) runInBackground(job func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		job(ctx)
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

// Close stops background work (in reverse order of start), flushes, and
// releases storage. It is safe to call more than once: later calls return
// the first call's result.
func (a *App) Close(ctx context.Context) error {
	a.closeOnce.Do(func() {
		a.draining.Store(true) // no readiness check from now on (suspectDependency)
		var errs []error
		for i := len(a.stops) - 1; i >= 0; i-- {
			errs = append(errs, a.stops[i](ctx))
		}
		errs = append(errs, a.Admission.Close(), a.KV.Close(), a.DB.Close())
		// Last: the spans of the shutdown itself are exported too.
		errs = append(errs, a.Cfg.Tracing.Shutdown(ctx))
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}

// warnSingleReplicaState says at start what a setting left empty costs once
// more than one replica runs, or once a stranger picks the Host header.
func warnSingleReplicaState(cfg config.Config, log *slog.Logger) {
	if !cfg.Embedded() && cfg.Redis.URL == "" {
		log.Warn("Postgres with the in-process store (GATEHOUSE_REDIS_URL empty): replay memory, rate windows and "+
			"revocation caches are per replica, so a signed request used on one replica is accepted again on "+
			"another and each replica grants an app its whole rate limit; run one replica, or set GATEHOUSE_REDIS_URL",
			"kv", "memory")
	}
	if cfg.Server.PublicURL == "" {
		log.Warn("GATEHOUSE_PUBLIC_URL is not set: the OAuth issuer and metadata endpoints are built from each " +
			"request's Host header (served with Cache-Control: no-store and Vary: Host); set it to the URL " +
			"clients reach the public listener at")
	}
}
