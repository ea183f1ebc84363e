// Package paysandbox is a SANDBOX payment provider for the demo
// (`gatehouse serve --demo`): a stand-in that lets a refund work out of the
// box on one machine. It moves no money and is never started without
// --demo (nor when GATEHOUSE_PAYMENT_URL names a real provider).
//
// It checks a refund the way a real provider would: the API key, the
// timestamp (within 5 minutes), the nonce (never twice), the signature
// X-Signature = Base64(HMAC-SHA256(secret, body + timestamp + nonce)), the
// body, and the Idempotency-Key (a repeat gets the first answer back).
package paysandbox

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"gatehouse/internal/outbound"
	"gatehouse/internal/secret"
)

// Sandbox is a running sandbox provider on a loopback port.
type Sandbox struct {
	// URL is its base URL (refunds go to URL + "/refunds").
	URL string
	// APIKey and Secret are random per start: gatehouse is configured
	// with them, nothing else knows them.
	APIKey string
	Secret string

	log    *slog.Logger
	server *http.Server
	now    func() time.Time

	mu      sync.Mutex
	nonces  map[string]time.Time // nonce → when it may be forgotten
	refunds map[string]reply     // Idempotency-Key → first answer
}

// Start listens on 127.0.0.1 (a free port) and serves until Close.
func Start(log *slog.Logger) (*Sandbox, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sandbox{
		URL:     "http://" + ln.Addr().String(),
		APIKey:  secret.RandomToken("sandbox_", 12),
		Secret:  base64.RawURLEncoding.EncodeToString(secret.RandomBytes(32)),
		log:     log.With("component", "payment SANDBOX"),
		now:     time.Now,
		nonces:  map[string]time.Time{},
		refunds: map[string]reply{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /refunds", s.refund)
	s.server = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       time.Minute,
	}
	go func() {
		if err := s.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("payment sandbox stopped", "err", err)
		}
	}()
	return s, nil
}

// Close stops the sandbox.
func (s *Sandbox) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.server.Shutdown(ctx)
}

// signature is what the sandbox expects in X-Signature.
func (s *Sandbox) signature(body []byte, ts, nonce string) string {
	return outbound.Signer{Secret: []byte(s.Secret)}.Signature(body, ts, nonce)
}
