package app

import (
	"context"

	"gatehouse/internal/outbound"
	"gatehouse/internal/payment"
	"gatehouse/internal/redact"
)

// paymentServices are the payment provider's services, embedded in App.
type paymentServices struct {
	// Payments refunds orders through the payment provider (refundOrder)
	// and reports the provider's breaker (paymentProvider).
	Payments *payment.Service
}

// wirePayments builds the refund service over its own outbound client:
// the documented limits of calls to external services (connect 3 s, read 5 s,
// 200/50 connections, 3 attempts after 1 s and 2 s, breaker 10/50 %/30 s/5),
// with the breaker reported in /metrics as target "payment".
func (a *App) wirePayments(context.Context) error {
	client, err := outbound.New(outbound.DefaultConfig(),
		outbound.WithMetrics(payment.BreakerKey),
		outbound.WithStateListener(func(key, from, to string) {
			if to == outbound.StateOpen {
				a.Log.Warn("payment provider circuit breaker opened: refunds fail at once with UPSTREAM_UNAVAILABLE until it lets trial calls through", "from", from, "to", to)
				return
			}
			a.Log.Info("payment provider circuit breaker changed state", "from", from, "to", to)
		}))
	if err != nil {
		return err
	}
	a.stops = append(a.stops, func(context.Context) error { client.Close(); return nil })
	p := payment.Provider{URL: a.Cfg.Payments.URL, APIKey: a.Cfg.Payments.APIKey, Secret: []byte(a.Cfg.Payments.Secret)}
	switch {
	case a.Cfg.PaymentSandbox:
		a.Log.Warn("payment provider: the demo SANDBOX on loopback (moves no money); set GATEHOUSE_PAYMENT_URL for a real provider", "url", redact.URL(p.URL))
	case p.Configured():
		a.Log.Info("payment provider configured", "host", redact.Host(p.URL))
	default:
		a.Log.Info("no payment provider configured: refundOrder answers PAYMENT_NOT_CONFIGURED (set GATEHOUSE_PAYMENT_URL, _API_KEY, _SECRET)")
	}
	a.Payments = payment.NewService(a.Orders, a.KV, client, p, a.Log, payment.WithTracing(a.Cfg.Tracing))
	return nil
}
