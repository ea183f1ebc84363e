package demo_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"gatehouse/internal/config"
	"gatehouse/internal/demo"
	"gatehouse/internal/testenv"
)

// TestDemoRefund: with the sandbox `serve --demo` starts, the refund
// command the banner prints works as printed (and again, without a second
// call), and so do the provider query and the cancel command. Seeded
// again (a restart), the banner offers other orders, whose commands work
// too: no stale refund or cancel line.
func TestDemoRefund(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a, ls, text := seedAndServe(t, b, func(c *config.Config) {
			sb, err := demo.StartPaymentSandbox(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil || sb == nil {
				t.Fatalf("sandbox: %v", err)
			}
			t.Cleanup(func() { sb.Close() })
		})
		section := refundsSection(t, text)
		if !strings.Contains(section, "SANDBOX at http://127.0.0.1:") || !strings.Contains(section, "moves NO money") {
			t.Errorf("the sandbox is not labelled as such:\n%s", section)
		}
		calls := curlRE.FindAllStringSubmatch(section, -1)
		if len(calls) != 3 {
			t.Fatalf("want 3 GraphQL calls in the refunds section:\n%s", section)
		}
		for range 2 {
			if r := post(t, calls[0]); !strings.Contains(r, `"orderNo":"`+demo.DemoRefundOrderNo+`","status":"REFUNDED"`) {
				t.Fatalf("refund: %s", r)
			}
		}
		if r := post(t, calls[1]); !strings.Contains(r, `{"configured":true,"breaker":"CLOSED"}`) {
			t.Fatalf("paymentProvider: %s", r)
		}
		if r := post(t, calls[2]); !strings.Contains(r, `"orderNo":"`+demo.DemoCancelOrderNo+`","status":"CANCELLED"`) {
			t.Fatalf("cancel: %s", r)
		}

		// A restart: the banner names orders its commands can still change.
		var out bytes.Buffer
		if err := demo.Seed(context.Background(), a, ls, &out); err != nil {
			t.Fatal(err)
		}
		section = refundsSection(t, out.String())
		if strings.Contains(section, demo.DemoRefundOrderNo) || strings.Contains(section, demo.DemoCancelOrderNo) {
			t.Fatalf("after the refund and the cancel, the banner still offers them:\n%s", section)
		}
		calls = curlRE.FindAllStringSubmatch(section, -1)
		if len(calls) != 3 {
			t.Fatalf("want 3 GraphQL calls in the refunds section:\n%s", section)
		}
		if r := post(t, calls[0]); !strings.Contains(r, `"status":"REFUNDED"`) {
			t.Fatalf("refund after a restart: %s", r)
		}
		if r := post(t, calls[2]); !strings.Contains(r, `"status":"CANCELLED"`) {
			t.Fatalf("cancel after a restart: %s", r)
		}
	})
}

// refundsSection is the banner's refunds section.
func refundsSection(t *testing.T, text string) string {
	t.Helper()
	start := strings.Index(text, "# Refunds")
	end := strings.Index(text, "# Webhooks")
	if start < 0 || end < start {
		t.Fatalf("no refunds section:\n%s", text)
	}
	return text[start:end]
}

// TestPaymentSandboxOnlyWithoutAProvider: a configured provider is kept,
// and no sandbox is started.
func TestPaymentSandboxOnlyWithoutAProvider(t *testing.T) {
	c := config.Defaults()
	c.Payments.URL, c.Payments.APIKey, c.Payments.Secret = "https://pay.example.com", "k", "s"
	sb, err := demo.StartPaymentSandbox(&c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || sb != nil || c.Payments.URL != "https://pay.example.com" || c.PaymentSandbox {
		t.Fatalf("sandbox %v, err %v, url %q, sandbox flag %v", sb, err, c.Payments.URL, c.PaymentSandbox)
	}
}
