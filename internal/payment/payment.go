// Package payment is gatehouse's side of the payment provider: refunds of
// paid orders (refundOrder). A refund is a signed POST {URL}/refunds made
// through the guarded outbound client (timeouts, connection caps, retries,
// circuit breaker), at most once per order thanks to an idempotency key
// held in the kv store; once the provider accepts, the order's move to
// REFUNDED and its order.refunded webhook commit together (internal/order).
//
// The provider's yes is stored (24 h) before the order is changed, so a
// crash or a failed commit in between loses nothing: the next refundOrder
// of that order finishes the refund without calling the provider again.
package payment

import (
	"log/slog"
	"strings"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/order"
	"gatehouse/internal/outbound"
	"gatehouse/internal/telemetry"
)

// BreakerKey names the payment provider's circuit breaker in the outbound
// client, and its target in /metrics (gatehouse_outbound_*{target="payment"}).
const BreakerKey = "payment"

// ExchangeTimeout bounds one refund's whole exchange with the provider
// (every attempt and wait; the outbound limits allow 3 × (3 s + 5 s) + 3 s).
// It stays below the idempotency lock's 5 minutes, so the lock cannot
// expire while a call is in flight.
const ExchangeTimeout = time.Minute

// Provider is the configured payment provider.
type Provider struct {
	// URL is the base URL; refunds are POSTed to URL + "/refunds".
	URL string
	// APIKey goes in X-API-Key; Secret keys the X-Signature HMAC.
	APIKey string
	Secret []byte
}

// Configured reports whether a provider is set.
func (p Provider) Configured() bool { return p.URL != "" }

// ErrNotConfigured: refunds need a payment provider and none is configured.
var ErrNotConfigured = errs.New(errs.PaymentNotConfigured,
	"no payment provider is configured (GATEHOUSE_PAYMENT_URL, GATEHOUSE_PAYMENT_API_KEY, GATEHOUSE_PAYMENT_SECRET)")

// ErrInProgress: another refundOrder of the same order holds its
// idempotency key and has not finished.
var ErrInProgress = errs.New(errs.Conflict, "a refund of this order is in progress; try again when it has finished")

// Service refunds orders through the payment provider.
type Service struct {
	orders   *order.Service
	kv       outbound.KV
	client   *outbound.Client
	provider Provider
	signer   *outbound.Signer
	log      *slog.Logger
	tracing  *telemetry.Tracing
}

// Option configures a Service.
type Option func(*Service)

// WithTracing makes a span per refund call to the provider, whose
// request carries its traceparent (nil: off).
func WithTracing(tr *telemetry.Tracing) Option { return func(s *Service) { s.tracing = tr } }

// NewService returns a Service calling provider through client (whose
// breaker for BreakerKey guards the provider), keeping idempotency keys
// and stored results in kv (the Redis or in-process store), and changing
// orders through orders. With no provider configured every refund fails
// with ErrNotConfigured.
func NewService(orders *order.Service, kv outbound.KV, client *outbound.Client, provider Provider, log *slog.Logger, opts ...Option) *Service {
	s := &Service{
		orders:   orders,
		kv:       kv,
		client:   client,
		provider: provider,
		signer:   &outbound.Signer{APIKey: provider.APIKey, Secret: provider.Secret},
		log:      log,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Configured reports whether a payment provider is configured.
func (s *Service) Configured() bool { return s.provider.Configured() }

// BreakerState is the state of the provider's circuit breaker on this
// replica: outbound.StateClosed, StateOpen or StateHalfOpen.
func (s *Service) BreakerState() string { return s.client.BreakerState(BreakerKey) }

// refundsURL is where refunds are sent.
func (s *Service) refundsURL() string { return strings.TrimRight(s.provider.URL, "/") + "/refunds" }

// IdempotencyKey is the Idempotency-Key of the refund of order orderNo:
// the same for every attempt and every refundOrder of that order.
func IdempotencyKey(orderNo string) string { return "refund-" + orderNo }
