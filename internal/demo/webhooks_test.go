package demo_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/demo"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook/receiver"
)

var listenRE = regexp.MustCompile(`(?m)^\./bin/gatehouse webhook listen --addr (\S+) --secret '(whsec_[^']+)' --oauth-client-secret '[^']+'( --oauth-token-url '[^']+')?$`)

// TestDemoWebhooks follows the banner's webhook steps as printed: the
// receiver it names (started with its secret, as `gatehouse webhook
// listen` does) gets the paid order's webhook and the test webhook, both
// verified; the delivery log shows them delivered. Seeding again (a
// restart) reads the database: the paid order is shown PAID and another
// CREATED order is offered. Only the demo app may call back loopback.
func TestDemoWebhooks(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a, ls, text := seedAndServe(t, b)
		section := text[strings.Index(text, "# Webhooks"):]
		listen := listenRE.FindStringSubmatch(section)
		calls := curlRE.FindAllStringSubmatch(section, -1)
		if listen == nil || len(calls) != 4 {
			t.Fatalf("want a listen command and 4 GraphQL calls in the webhooks section:\n%s", section)
		}
		var out apptest.SyncBuffer
		rcv, err := receiver.NewReceiver(listen[2], &out)
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", listen[1])
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: rcv, ReadHeaderTimeout: time.Second}
		go srv.Serve(l) //nolint:errcheck // closed below
		t.Cleanup(func() { srv.Close() })
		arrived := func(what string) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), what) {
				if time.Now().After(deadline) {
					t.Fatalf("the receiver did not print %q:\n%s", what, out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}

		if r := post(t, calls[0]); !strings.Contains(r, `"status":"PAID"`) || !strings.Contains(section, "pay order SO1002") {
			t.Fatalf("payOrder: %s", r)
		}
		arrived("eventType: order.paid")
		post(t, calls[1])
		arrived("eventType: webhook.test")
		if strings.Count(out.String(), "signature:         verified") != 2 || strings.Contains(out.String(), "INVALID") {
			t.Fatalf("the receiver did not verify both deliveries:\n%s", out.String())
		}
		// The receiver prints before the outcome is stored.
		deadline := time.Now().Add(10 * time.Second)
		for r := post(t, calls[2]); strings.Count(r, `"status":"SUCCESS"`) != 2 || !strings.Contains(r, `"webhookBreaker":"CLOSED"`); r = post(t, calls[2]) {
			if time.Now().After(deadline) {
				t.Fatalf("delivery log: %s", r)
			}
			time.Sleep(10 * time.Millisecond)
		}
		post(t, calls[3]) // resend failed: none

		// Seeding again, as after a restart: the banner shows the database.
		var again bytes.Buffer
		if err := demo.Seed(context.Background(), a, ls, &again); err != nil {
			t.Fatal(err)
		}
		if s := again.String(); !strings.Contains(s, "SO1002 (PAID)") || strings.Contains(s, "pay order SO1002") || !strings.Contains(s, "pay order SO1006") {
			t.Fatalf("after a restart the banner shows:\n%s", s)
		}

		// Only the demo app may call back loopback.
		key := calls[0][2]
		for _, q := range []string{
			`{"query":"mutation { createPartnerApp(input: {appName: \"x\", callbackURL: \"http://` + listen[1] + `/hook\"}) { app { id } } }"}`,
			`{"query":"mutation { updatePartnerApp(id: 2, input: {callbackURL: \"http://127.0.0.1:9/hook\"}) { id } }"}`,
		} {
			_, r := send(t, calls[0][1], key, q)
			if !strings.Contains(r, "VALIDATION_FAILED") {
				t.Errorf("another app's loopback callback was accepted: %s", r)
			}
		}
	})
}
