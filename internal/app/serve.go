package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"gatehouse/internal/shed"
)

// Server timeouts: bounded so that slow or idle clients cannot hold
// connections forever.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	// ShutdownTimeout bounds how long in-flight requests may finish.
	ShutdownTimeout = 20 * time.Second
)

// NewHTTPServer returns an http.Server for h with the production limits:
// bounded timeouts and at most 64 KiB of request headers. Tests serve
// through it too, so that they meet the same limits.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		// Load shedding asks the kernel whether a request's client is
		// still connected before starting it.
		ConnContext: shed.ConnContext,
	}
}

// Listeners are the bound sockets of a running App.
type Listeners struct {
	Public, Admin, MTLS net.Listener
}

// Listen binds every configured listener, so that callers (and tests using
// port 0) learn the addresses before serving starts.
func (a *App) Listen() (*Listeners, error) {
	var l Listeners
	var err error
	if l.Public, err = net.Listen("tcp", a.Cfg.Server.Addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", a.Cfg.Server.Addr, err)
	}
	if l.Admin, err = net.Listen("tcp", a.Cfg.Server.AdminAddr); err != nil {
		l.Public.Close()
		return nil, fmt.Errorf("listen on %s: %w", a.Cfg.Server.AdminAddr, err)
	}
	if a.Cfg.TLS.MTLSAddr != "" {
		if l.MTLS, err = net.Listen("tcp", a.Cfg.TLS.MTLSAddr); err != nil {
			l.Public.Close()
			l.Admin.Close()
			return nil, fmt.Errorf("listen on %s: %w", a.Cfg.TLS.MTLSAddr, err)
		}
	}
	return &l, nil
}

// Serve runs the listeners until ctx ends, then shuts down gracefully:
// stop accepting, let in-flight requests finish (bounded), stop background
// work, flush, and close storage.
func (a *App) Serve(ctx context.Context, l *Listeners) error {
	type srv struct {
		s    *http.Server
		ln   net.Listener
		tls  bool
		name string
	}
	servers := []srv{{s: NewHTTPServer(a.Public), ln: l.Public, name: "public"}, {s: NewHTTPServer(a.Admin), ln: l.Admin, name: "admin"}}
	// A setup failure must not leak the bound sockets nor the storage.
	setupFailed := func(err error) error {
		for _, ln := range []net.Listener{l.Public, l.Admin, l.MTLS} {
			if ln != nil {
				ln.Close()
			}
		}
		return errors.Join(err, a.Close(context.WithoutCancel(ctx)))
	}
	if a.Cfg.TLS.Cert != "" {
		cert, err := tls.LoadX509KeyPair(a.Cfg.TLS.Cert, a.Cfg.TLS.Key)
		if err != nil {
			return setupFailed(fmt.Errorf("load TLS certificate: %w", err))
		}
		// Both listeners: the admin one carries API keys.
		for i := range servers {
			servers[i].s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			servers[i].tls = true
		}
		if l.MTLS != nil {
			pem, err := os.ReadFile(a.Cfg.TLS.ClientCA)
			if err != nil {
				return setupFailed(fmt.Errorf("read GATEHOUSE_CLIENT_CA: %w", err))
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return setupFailed(errors.New("GATEHOUSE_CLIENT_CA holds no PEM certificate"))
			}
			m := NewHTTPServer(a.Public)
			m.TLSConfig = &tls.Config{
				Certificates: []tls.Certificate{cert},
				ClientCAs:    pool,
				ClientAuth:   tls.RequireAndVerifyClientCert,
				MinVersion:   tls.VersionTLS12,
			}
			// Refused handshakes (no or untrusted client certificate) are
			// reported by net/http through ErrorLog: keep them in the
			// structured log.
			m.ErrorLog = slog.NewLogLogger(a.Log.With("listener", "mtls").Handler(), slog.LevelInfo)
			servers = append(servers, srv{s: m, ln: l.MTLS, tls: true, name: "mtls"})
		}
	}
	if l.MTLS != nil && a.Cfg.TLS.Cert == "" {
		return setupFailed(errors.New("GATEHOUSE_MTLS_ADDR needs GATEHOUSE_TLS_CERT and GATEHOUSE_TLS_KEY"))
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		s.ln = a.capConns(s.ln, s.s, s.name, s.tls)
		go func() {
			var err error
			if s.tls {
				err = s.s.ServeTLS(s.ln, "", "")
			} else {
				err = s.s.Serve(s.ln)
			}
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errc <- err
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	a.draining.Store(true)
	if d := a.Cfg.ShutdownDrain; d > 0 && serveErr == nil {
		// Keep serving while load balancers notice /readyz failing.
		a.Log.Info("draining before shutdown", "for", d.String())
		time.Sleep(d)
	}
	a.Log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, s := range servers {
		if err := s.s.Shutdown(sctx); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, a.Close(sctx))
	if serveErr != nil {
		errs = append(errs, serveErr)
	}
	return errors.Join(errs...)
}
