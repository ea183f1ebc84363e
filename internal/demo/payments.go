package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"gatehouse/internal/config"
	"gatehouse/internal/demo/paysandbox"
	"gatehouse/internal/order"
)

func init() { register(45, seedPayments) }

// The demo orders of the refund and cancel examples.
const (
	DemoRefundOrderNo = "SO1004"
	DemoCancelOrderNo = "SO1005"
)

// StartPaymentSandbox starts the payment SANDBOX on loopback and points
// cfg's payment provider at it, so that a refund works out of the box in
// the demo. It does nothing (nil, nil) when cfg names a payment provider
// already. Only `serve --demo` calls it: production never runs the
// sandbox. The caller closes it after the service has stopped.
func StartPaymentSandbox(cfg *config.Config, log *slog.Logger) (*paysandbox.Sandbox, error) {
	if cfg.Payments.URL != "" {
		return nil, nil
	}
	sb, err := paysandbox.Start(log)
	if err != nil {
		return nil, fmt.Errorf("start the payment sandbox: %w", err)
	}
	cfg.Payments.URL, cfg.Payments.APIKey, cfg.Payments.Secret = sb.URL, sb.APIKey, sb.Secret
	cfg.PaymentSandbox = true
	return sb, nil
}

// RefundMutation is the demo's refund example for order orderNo.
func RefundMutation(orderNo string) string {
	return `mutation { refundOrder(orderNo: "` + orderNo + `", reason: "customer returned the goods") { orderNo status } }`
}

func seedPayments(ctx context.Context, e Env, b *strings.Builder) error {
	app, err := e.App.Partners.GetByKey(ctx, DemoAppKey)
	if err != nil {
		return fmt.Errorf("demo payments: %w", err)
	}
	// Orders as they are now: once the printed refund or cancel ran, the
	// next start prints another order the same command still changes.
	refund, err := exampleOrder(ctx, e, app.ID, order.Paid, refundCustomer, refundAmount)
	if err != nil {
		return err
	}
	cancel, err := exampleOrder(ctx, e, app.ID, order.Created, cancelCustomer, cancelAmount)
	if err != nil {
		return err
	}
	key := DemoAdminKey(e)
	gql := func(query string) string {
		body, _ := json.Marshal(map[string]string{"query": query})
		return fmt.Sprintf("curl -s %s/graphql -H 'Content-Type: application/json' -H 'X-API-Key: %s' \\\n  -d '%s'\n",
			e.AdminURL, key, body)
	}
	cfg := e.App.Cfg
	fmt.Fprintf(b, "# Refunds through the payment provider (signed, retried, circuit breaker; see docs/payments.md)\n")
	switch {
	case cfg.PaymentSandbox:
		fmt.Fprintf(b, "provider:   SANDBOX at %s -- a stand-in started by --demo on loopback that checks the API key,\n", cfg.Payments.URL)
		fmt.Fprintf(b, "            timestamp, nonce and signature like a real provider; it moves NO money. A real provider:\n")
		fmt.Fprintf(b, "            GATEHOUSE_PAYMENT_URL, GATEHOUSE_PAYMENT_API_KEY, GATEHOUSE_PAYMENT_SECRET (no sandbox then).\n")
	case cfg.Payments.URL != "":
		fmt.Fprintf(b, "provider:   GATEHOUSE_PAYMENT_URL (a real provider: the refund below is a real refund)\n")
	}
	fmt.Fprintf(b, "# refund %s (PAID -> REFUNDED, order.refunded webhook queued; a repeat returns it without a second call):\n", refund)
	b.WriteString(gql(RefundMutation(refund)))
	fmt.Fprintf(b, "# the provider and its circuit breaker (also gatehouse_outbound_* in %s/metrics):\n", e.AdminURL)
	b.WriteString(gql(`{ paymentProvider { configured breaker } }`))
	fmt.Fprintf(b, "# cancel %s (CREATED -> CANCELLED, order.cancelled webhook queued):\n", cancel)
	b.WriteString(gql(`mutation { cancelOrder(orderNo: "` + cancel + `") { orderNo status } }`))
	return nil
}
