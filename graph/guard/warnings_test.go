package graph_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/testenv"
)

// TestWebhookWarnings: payOrder, cancelOrder and refundOrder succeed and
// say in extensions.warnings when their webhook does not go out at once:
// NO_CALLBACK_URL for an app without a callback URL (nothing is queued),
// WEBHOOK_HELD for a disabled app (the delivery waits). An app that
// receives gets no warning.
func TestWebhookWarnings(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b, withProvider(paymenttest.New(t)))
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		t.Cleanup(sink.Close)
		newApp := func(name, callback string) string {
			in := map[string]any{"appName": name}
			if callback != "" {
				in["callbackURL"] = callback
			}
			return str(a.gql(t, createAppMutation, map[string]any{"in": in}).ok(t, "createPartnerApp"), "app", "id")
		}
		create := func(app, no string) {
			a.gql(t, `mutation($app: ID!, $no: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: "5.00"}) { id } }`,
				map[string]any{"app": app, "no": no}).ok(t, "createOrder")
		}
		const (
			pay    = `mutation($no: String!) { payOrder(orderNo: $no) { status } }`
			cancel = `mutation($no: String!) { cancelOrder(orderNo: $no) { status } }`
		)
		apps := map[string]string{
			"":                newApp("receives", sink.URL+"/hook"),
			"NO_CALLBACK_URL": newApp("no callback", ""),
			"WEBHOOK_HELD":    newApp("held", sink.URL+"/held"),
		}
		for warning, app := range apps {
			for _, no := range []string{"pay", "cancel", "refund"} {
				create(app, warning+no)
			}
			a.gql(t, pay, map[string]any{"no": warning + "refund"}).ok(t, "payOrder")
		}
		a.gql(t, `mutation($id: ID!) { updatePartnerApp(id: $id, input: {status: 0}) { id } }`, map[string]any{"id": apps["WEBHOOK_HELD"]}).ok(t, "updatePartnerApp")

		for warning := range apps {
			for _, m := range []struct{ field, query, no, status string }{
				{"payOrder", pay, "pay", "PAID"},
				{"cancelOrder", cancel, "cancel", "CANCELLED"},
				{"refundOrder", refund, "refund", "REFUNDED"},
			} {
				name := warning
				if name == "" {
					name = "none"
				}
				t.Run(fmt.Sprintf("%s %s", m.field, name), func(t *testing.T) {
					r := a.gql(t, m.query, map[string]any{"no": warning + m.no})
					if str(r.ok(t, m.field), "status") != m.status {
						t.Fatalf("%s: %s", m.field, r.Body)
					}
					if warning == "" {
						if r.Extensions["warnings"] != nil {
							t.Fatalf("%s of an app that receives warns: %s", m.field, r.Body)
						}
						return
					}
					ws, _ := r.Extensions["warnings"].([]any)
					if len(ws) != 1 || str(ws[0], "code") != warning || str(ws[0], "message") == "" || dig(ws[0], "path", 0) != m.field {
						t.Fatalf("%s: warnings %v, want one %s about %s", m.field, r.Extensions["warnings"], warning, m.field)
					}
				})
			}
		}
	})
}
