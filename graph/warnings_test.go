package graph_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"gatehouse/graph/graphtest"
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
		a := graphtest.StartAdmin(t, b, withProvider(paymenttest.New(t)))
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		t.Cleanup(sink.Close)
		newApp := func(name, callback string) string {
			in := map[string]any{"appName": name}
			if callback != "" {
				in["callbackURL"] = callback
			}
			return graphtest.Str(a.GQL(t, createAppMutation, map[string]any{"in": in}).OK(t, "createPartnerApp"), "app", "id")
		}
		create := func(app, no string) {
			a.GQL(t, `mutation($app: ID!, $no: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: "5.00"}) { id } }`,
				map[string]any{"app": app, "no": no}).OK(t, "createOrder")
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
			a.GQL(t, pay, map[string]any{"no": warning + "refund"}).OK(t, "payOrder")
		}
		a.GQL(t, `mutation($id: ID!) { updatePartnerApp(id: $id, input: {status: 0}) { id } }`, map[string]any{"id": apps["WEBHOOK_HELD"]}).OK(t, "updatePartnerApp")

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
					r := a.GQL(t, m.query, map[string]any{"no": warning + m.no})
					if graphtest.Str(r.OK(t, m.field), "status") != m.status {
						t.Fatalf("%s: %s", m.field, r.Body)
					}
					if warning == "" {
						if r.Extensions["warnings"] != nil {
							t.Fatalf("%s of an app that receives warns: %s", m.field, r.Body)
						}
						return
					}
					ws, _ := r.Extensions["warnings"].([]any)
					if len(ws) != 1 || graphtest.Str(ws[0], "code") != warning || graphtest.Str(ws[0], "message") == "" || graphtest.Dig(ws[0], "path", 0) != m.field {
						t.Fatalf("%s: warnings %v, want one %s about %s", m.field, r.Extensions["warnings"], warning, m.field)
					}
				})
			}
		}
	})
}
