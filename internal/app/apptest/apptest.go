// Package apptest starts a fully wired gatehouse behind httptest servers on
// one storage backend, for black-box HTTP tests.
package apptest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/app"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// Env is a running gatehouse.
type Env struct {
	App       *app.App
	PublicURL string
	AdminURL  string
	Client    *http.Client
	Logs      *SyncBuffer
}

// Option adjusts the configuration before the app is built.
type Option func(*config.Config)

// Start builds the app on backend b and serves both handlers; everything is
// torn down when the test ends.
func Start(t testing.TB, b testenv.Backend, opts ...Option) *Env {
	t.Helper()
	cfg := Config(t, b)
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.Resolve(); err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatalf("app.Start: %v", err)
	}
	pub := serve(a.Public)
	adm := serve(a.Admin)
	t.Cleanup(func() {
		pub.Close()
		adm.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Close(cctx)
	})
	return &Env{App: a, PublicURL: pub.URL, AdminURL: adm.URL, Client: pub.Client(), Logs: logs}
}

// serve starts an httptest server with the production server settings
// (timeouts, 64 KiB header limit) rather than httptest's defaults.
func serve(h http.Handler) *httptest.Server {
	s := httptest.NewUnstartedServer(h)
	s.Config = app.NewHTTPServer(h)
	s.Start()
	return s
}

// Config returns the configuration Start uses for backend b: a temp data
// dir, fresh keys, and the backend's database and Redis prefix.
func Config(t testing.TB, b testenv.Backend) config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.Server.Addr = "127.0.0.1:0"
	cfg.Server.AdminAddr = "127.0.0.1:0"
	cfg.Database.DataDir = t.TempDir()
	cfg.Auth.MasterKeyB64 = base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
	cfg.Auth.JWTSecretRaw = base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
	if b.Embedded() {
		cfg.Database.URL = "sqlite:" + filepath.Join(cfg.Database.DataDir, "gatehouse.db")
	} else {
		cfg.Database.URL = b.DatabaseURL
		cfg.Redis.URL = b.RedisURL
		cfg.Redis.KeyPrefix = b.KeyPrefix
	}
	cfg.Log.Level = "debug"
	// Load shedding stays on, but a request is never too late for it:
	// with -race on a machine shared by parallel test runs, requests wait
	// past the production budget while the process is congested, and a
	// test would see a 503 that says nothing about what it tests. The
	// shedding tests set their own limits.
	cfg.Shed.QueueBudget = 10 * time.Second
	return cfg
}

// Response is a read response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %q: %v", r.Body, err)
	}
}

// Map decodes the body as a JSON object.
func (r Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// Do sends a request with an optional body and headers (pairs of name, value).
func (e *Env) Do(t testing.TB, method, url string, body string, headers ...string) Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// JSONBody is the Content-Type header pair for JSON bodies.
var JSONBody = []string{"Content-Type", "application/json"}

// SyncBuffer is a goroutine-safe log sink tests can search.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// WebhookSecrets returns the plaintext webhook secrets app id signs with
// now, read from the database with the env's master key: the current one,
// then the previous one while its overlap lasts.
func WebhookSecrets(t testing.TB, e *Env, id int) []string {
	t.Helper()
	row, err := e.App.DB.Client.PartnerApp.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("webhook secrets of app %d: %v", id, err)
	}
	sealer, err := secret.NewSealer(e.App.Cfg.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	open := func(sealed []byte) {
		p, err := sealer.Open(sealed)
		if err != nil {
			t.Fatalf("webhook secret of app %d: %v", id, err)
		}
		out = append(out, string(p))
	}
	if row.WebhookSecret != nil {
		open(*row.WebhookSecret)
	}
	if row.PreviousWebhookSecret != nil && row.PreviousWebhookSecretExpiresAt != nil && time.Now().Before(*row.PreviousWebhookSecretExpiresAt) {
		open(*row.PreviousWebhookSecret)
	}
	return out
}

// CreateApp creates a partner app through the service, the way the admin
// does (named "test app" unless in names it), and returns it with its
// app secret.
func CreateApp(t testing.TB, e *Env, in partner.CreateInput) (partner.App, string) {
	t.Helper()
	if in.AppName == "" {
		in.AppName = "test app"
	}
	app, sec, err := e.App.Partners.Create(context.Background(), in)
	if err != nil {
		t.Fatalf("create app: %v", err)
	}
	return app, sec.AppSecret
}
