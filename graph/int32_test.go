package graph_test

import (
	"strings"
	"testing"

	"gatehouse/internal/testenv"
)

// TestDeprecatedAmountBeyond32Bits: the deprecated Order.amount (GraphQL's
// 32-bit Int) answers a value that fits, and raises a field error naming
// amountMinor for one beyond 32 bits instead of returning a number no Int
// can be (9999999999 was returned as is); amountMinor carries it.
func TestDeprecatedAmountBeyond32Bits(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Big"}}).ok(t, "createPartnerApp")
		app := str(p, "app", "id")
		for no, amount := range map[string]string{"SMALL": "21474836.47", "BIG": "99999999.99"} {
			a.gql(t, `mutation($app: ID!, $no: String!, $amount: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: $amount}) { id } }`,
				map[string]any{"app": app, "no": no, "amount": amount}).ok(t, "createOrder")
		}
		const q = `query($no: String!) { orders(where: {orderNo: $no}) { edges { node { amount } } } }`
		small := a.gql(t, q, map[string]any{"no": "SMALL"}).ok(t, "orders")
		if got := num(small, "edges", 0, "node", "amount"); got != 2147483647 {
			t.Errorf("amount %d, want 2147483647", got)
		}
		e := a.gql(t, q, map[string]any{"no": "BIG"}).fails(t, "INVALID_STATE")
		if !strings.Contains(e.Message, "amountMinor") || len(e.Path) == 0 || e.Path[len(e.Path)-1] != "amount" {
			t.Errorf("error %q at %v, want one naming amountMinor at the amount field", e.Message, e.Path)
		}
		big := a.gql(t, `{ orders(where: {orderNo: "BIG"}) { edges { node { amountMinor } } } }`, nil).ok(t, "orders")
		if got := str(big, "edges", 0, "node", "amountMinor"); got != "9999999999" {
			t.Errorf("amountMinor %q, want 9999999999", got)
		}
	})
}
