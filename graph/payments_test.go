package graph_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/config"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/testenv"
)

// shop creates an app whose webhooks go to a sink, and orders in it.
func shop(t *testing.T, a *graphtest.Admin) (appID string, order func(no string, paid bool)) {
	t.Helper()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(sink.Close)
	p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Shop", "callbackURL": sink.URL + "/hook"}}).OK(t, "createPartnerApp")
	appID = graphtest.Str(p, "app", "id")
	return appID, func(no string, paid bool) {
		t.Helper()
		a.GQL(t, `mutation($app: ID!, $no: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: "99.90"}) { id } }`,
			map[string]any{"app": appID, "no": no}).OK(t, "createOrder")
		if paid {
			a.GQL(t, `mutation($no: String!) { payOrder(orderNo: $no) { status } }`, map[string]any{"no": no}).OK(t, "payOrder")
		}
	}
}

func withProvider(p *paymenttest.Provider) func(*config.Config) {
	return func(c *config.Config) {
		c.Webhooks.AllowPrivate = true
		c.Payments.URL, c.Payments.APIKey, c.Payments.Secret = p.URL, p.APIKey, p.Secret
	}
}

const refund = `mutation($no: String!, $reason: String) { refundOrder(orderNo: $no, reason: $reason) { orderNo status payTime } }`

// deliveries returns the event types queued for app appID.
func deliveries(t *testing.T, a *graphtest.Admin, appID string) []string {
	t.Helper()
	d := a.GQL(t, `query($app: ID!) { webhookDeliveries(where: {appID: $app}, orderBy: {field: CREATE_TIME, direction: ASC}) { edges { node { eventType } } } }`,
		map[string]any{"app": appID}).OK(t, "webhookDeliveries")
	var out []string
	for _, e := range graphtest.Dig(d, "edges").([]any) {
		out = append(out, graphtest.Str(e, "node", "eventType"))
	}
	return out
}

// TestCancelOrder: CREATED → CANCELLED with order.cancelled; any other
// state is INVALID_STATE; racing payOrder and cancelOrder on one order,
// exactly one wins.
func TestCancelOrder(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		appID, order := shop(t, a)
		const cancel = `mutation($no: String!) { cancelOrder(orderNo: $no) { orderNo status payTime } }`
		order("C-1", false)
		c := a.GQL(t, cancel, map[string]any{"no": "C-1"}).OK(t, "cancelOrder")
		if graphtest.Str(c, "status") != "CANCELLED" || graphtest.Dig(c, "payTime") != nil {
			t.Fatalf("cancelOrder: %v", c)
		}
		e := a.GQL(t, cancel, map[string]any{"no": "C-1"}).Fails(t, "INVALID_STATE")
		if e.Message != "order status does not allow this: order C-1 is CANCELLED, only CREATED orders can be cancelled" {
			t.Errorf("message %q", e.Message)
		}
		order("C-2", true)
		a.GQL(t, cancel, map[string]any{"no": "C-2"}).Fails(t, "INVALID_STATE")
		a.GQL(t, cancel, map[string]any{"no": "C-nope"}).Fails(t, "NOT_FOUND")
		a.GQL(t, `mutation { payOrder(orderNo: "C-1") { status } }`, nil).Fails(t, "INVALID_STATE")
		if got := deliveries(t, a, appID); fmt.Sprint(got) != "[order.cancelled order.paid]" {
			t.Errorf("deliveries %v", got)
		}

		// A hostile race: payOrder and cancelOrder of one order in parallel.
		order("C-3", false)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []string
		)
		for i := range 16 {
			op := "payOrder"
			if i%2 == 0 {
				op = "cancelOrder"
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := a.GQL(t, `mutation($no: String!) { `+op+`(orderNo: $no) { status } }`, map[string]any{"no": "C-3"})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case len(r.Errors) == 0:
					wins = append(wins, op)
				case r.Errors[0].Code() != "INVALID_STATE":
					t.Errorf("%s: %s", op, r.Body)
				}
			}()
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("%d winners (%v), want 1", len(wins), wins)
		}
		if got := deliveries(t, a, appID); len(got) != 3 {
			t.Errorf("deliveries after the race: %v", got)
		}
	})
}

// TestRefundOrder: refundOrder and paymentProvider through the admin
// endpoint against a provider on loopback that checks every header and
// the signature; the errors' codes; parallel refunds; /metrics.
func TestRefundOrder(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		p := paymenttest.New(t)
		a := graphtest.StartAdmin(t, b, withProvider(p))
		appID, order := shop(t, a)
		pp := a.GQL(t, `{ paymentProvider { configured breaker } }`, nil).OK(t, "paymentProvider")
		if graphtest.Dig(pp, "configured") != true || graphtest.Str(pp, "breaker") != "CLOSED" {
			t.Fatalf("paymentProvider: %v", pp)
		}

		order("R-1", true)
		r := a.GQL(t, refund, map[string]any{"no": "R-1", "reason": "returned"}).OK(t, "refundOrder")
		if graphtest.Str(r, "status") != "REFUNDED" || graphtest.Str(r, "orderNo") != "R-1" {
			t.Fatalf("refundOrder: %v", r)
		}
		a.GQL(t, refund, map[string]any{"no": "R-1"}).OK(t, "refundOrder") // a repeat: no call
		if c := p.Calls(); len(c) != 1 || c[0].OrderNo != "R-1" || c[0].Amount != "99.90" || c[0].Reason != "returned" {
			t.Fatalf("provider calls %+v", c)
		}
		if got := deliveries(t, a, appID); fmt.Sprint(got) != "[order.paid order.refunded]" {
			t.Errorf("deliveries %v", got)
		}

		order("R-2", false)
		a.GQL(t, refund, map[string]any{"no": "R-2"}).Fails(t, "INVALID_STATE")
		a.GQL(t, refund, map[string]any{"no": "R-nope"}).Fails(t, "NOT_FOUND")
		order("R-3", true)
		a.GQL(t, refund, map[string]any{"no": "R-3", "reason": "nul\x00inside"}).Fails(t, "VALIDATION_FAILED")
		e := a.GQL(t, refund, map[string]any{"no": "R-3", "reason": strings.Repeat("x", 257)}).Fails(t, "VALIDATION_FAILED")
		if e.Extensions["field"] != "reason" {
			t.Errorf("field %v", e.Extensions)
		}
		if n := len(p.Calls()); n != 1 {
			t.Errorf("%d provider calls after refused input, want 1", n)
		}

		// The provider refuses: PAYMENT_FAILED with its status, order PAID.
		p.Script(402)
		e = a.GQL(t, refund, map[string]any{"no": "R-3"}).Fails(t, "PAYMENT_FAILED")
		if e.Extensions["providerStatus"] != float64(402) || !strings.Contains(e.Message, "HTTP 402") {
			t.Errorf("PAYMENT_FAILED: %+v", e)
		}
		o := a.GQL(t, `{ orders(where: {orderNo: "R-3"}) { edges { node { status } } } }`, nil).OK(t, "orders")
		if graphtest.Str(o, "edges", 0, "node", "status") != "PAID" {
			t.Errorf("order after a refused refund: %v", o)
		}

		// Parallel refunds of one order: one provider call, CONFLICT for
		// the others while it is in flight.
		p.Script(200)
		order("R-4", true)
		p.Hold()
		calls := len(p.Calls())
		first := make(chan graphtest.Result, 1)
		go func() { first <- a.GQL(t, refund, map[string]any{"no": "R-4"}) }()
		p.Arrived(t)
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.GQL(t, refund, map[string]any{"no": "R-4"}).Fails(t, "CONFLICT")
			}()
		}
		wg.Wait()
		p.Release()
		(<-first).OK(t, "refundOrder")
		if n := len(p.Calls()) - calls; n != 1 {
			t.Errorf("%d provider calls for parallel refunds, want 1", n)
		}
		for _, pr := range p.Problems() {
			t.Error(pr)
		}

		m := a.Do(t, "GET", a.AdminURL+"/metrics", "")
		for _, re := range []string{
			`gatehouse_outbound_breaker_state\{target="payment"\} 0`,
			`gatehouse_outbound_calls_total\{target="payment"\} [1-9]`,
			`gatehouse_outbound_failures_total\{target="payment"\} \d`,
			`gatehouse_outbound_rejected_total\{target="payment"\} \d`,
		} {
			if !regexp.MustCompile(re).Match(m.Body) {
				t.Errorf("/metrics lacks %s", re)
			}
		}
	})
}

// TestRefundOrderBreakerOpen: with the production limits (3 attempts, 1 s
// and 2 s waits, breaker window 10 at 50 %), four refunds against a
// failing provider open the breaker (the 10th call is the first judged);
// the next refund fails at once with UPSTREAM_UNAVAILABLE without a call,
// and paymentProvider and /metrics show it OPEN.
func TestRefundOrderBreakerOpen(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		p := paymenttest.New(t)
		p.Script(500)
		a := graphtest.StartAdmin(t, b, withProvider(p))
		_, order := shop(t, a)
		for i, no := range []string{"B-1", "B-2", "B-3", "B-4"} {
			order(no, true)
			e := a.GQL(t, refund, map[string]any{"no": no}).Fails(t, "PAYMENT_FAILED")
			if e.Extensions["providerStatus"] != float64(500) {
				t.Errorf("refund %d: %+v", i+1, e)
			}
			if want := min(3*(i+1), 10); len(p.Calls()) != want {
				t.Fatalf("%d calls after refund %d, want %d (the 10th call fails and opens the breaker)", len(p.Calls()), i+1, want)
			}
		}
		order("B-5", true)
		e := a.GQL(t, refund, map[string]any{"no": "B-5"}).Fails(t, "UPSTREAM_UNAVAILABLE")
		if !strings.Contains(e.Message, "circuit breaker is open") || len(p.Calls()) != 10 {
			t.Errorf("while open: %q, %d calls", e.Message, len(p.Calls()))
		}
		pp := a.GQL(t, `{ paymentProvider { configured breaker } }`, nil).OK(t, "paymentProvider")
		if graphtest.Str(pp, "breaker") != "OPEN" {
			t.Errorf("paymentProvider: %v", pp)
		}
		m := a.Do(t, "GET", a.AdminURL+"/metrics", "")
		if !strings.Contains(string(m.Body), `gatehouse_outbound_breaker_state{target="payment"} 2`) {
			t.Errorf("/metrics does not show the open breaker")
		}
	})
}

// TestRefundOrderNotConfigured: without GATEHOUSE_PAYMENT_URL.
func TestRefundOrderNotConfigured(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		_, order := shop(t, a)
		order("N-1", true)
		a.GQL(t, refund, map[string]any{"no": "N-1"}).Fails(t, "PAYMENT_NOT_CONFIGURED")
		pp := a.GQL(t, `{ paymentProvider { configured breaker } }`, nil).OK(t, "paymentProvider")
		if graphtest.Dig(pp, "configured") != false || graphtest.Str(pp, "breaker") != "CLOSED" {
			t.Errorf("paymentProvider: %v", pp)
		}
	})
}
