package graph_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/testenv"
)

// TestDeprecatedAmountBeyond32Bits: the deprecated Order.amount (GraphQL's
// 32-bit Int) answers a value that fits, and raises a field error naming
// amountMinor for one beyond 32 bits instead of returning a number no Int
// can be (9999999999 was returned as is); amountMinor carries it.
func TestDeprecatedAmountBeyond32Bits(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Big"}}).OK(t, "createPartnerApp")
		app := graphtest.Str(p, "app", "id")
		for no, amount := range map[string]string{"SMALL": "21474836.47", "BIG": "99999999.99"} {
			a.GQL(t, `mutation($app: ID!, $no: String!, $amount: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: $amount}) { id } }`,
				map[string]any{"app": app, "no": no, "amount": amount}).OK(t, "createOrder")
		}
		const q = `query($no: String!) { orders(where: {orderNo: $no}) { edges { node { amount } } } }`
		small := a.GQL(t, q, map[string]any{"no": "SMALL"}).OK(t, "orders")
		if got := graphtest.Num(small, "edges", 0, "node", "amount"); got != 2147483647 {
			t.Errorf("amount %d, want 2147483647", got)
		}
		e := a.GQL(t, q, map[string]any{"no": "BIG"}).Fails(t, "INVALID_STATE")
		if !strings.Contains(e.Message, "amountMinor") || len(e.Path) == 0 || e.Path[len(e.Path)-1] != "amount" {
			t.Errorf("error %q at %v, want one naming amountMinor at the amount field", e.Message, e.Path)
		}
		big := a.GQL(t, `{ orders(where: {orderNo: "BIG"}) { edges { node { amountMinor } } } }`, nil).OK(t, "orders")
		if got := graphtest.Str(big, "edges", 0, "node", "amountMinor"); got != "9999999999" {
			t.Errorf("amountMinor %q, want 9999999999", got)
		}
	})
}

// TestDeprecatedCountersBeyond32Bits: the deprecated Int counters
// (APIKey.usageCount, APIUsage.count, APIVersion.callsLast30Days) answer a
// value that fits 32 bits and raise a field error naming their Int64 form
// for one beyond (5000000000 was returned as is), like Order.amount.
func TestDeprecatedCountersBeyond32Bits(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		ctx := t.Context()
		appID := graphtest.IntID(t, a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Busy"}}).OK(t, "createPartnerApp"), "app", "id")
		usage, err := a.App.DB.APIUsage.Create().SetAppID(appID).SetVersion("v2").
			SetDay(time.Now().UTC().Format(time.DateOnly)).SetCount(math.MaxInt32).Save(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.App.DB.APIKey.Update().SetUsageCount(math.MaxInt32).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		const q = `{
			apiUsages(first: 1) { edges { node { count } } }
			apiKeys(first: 1) { edges { node { usageCount } } }
			apiVersions { name callsLast30Days }
		}`
		fits := a.GQL(t, q, nil)
		if len(fits.Errors) > 0 || graphtest.Num(fits.Data, "apiUsages", "edges", 0, "node", "count") != math.MaxInt32 ||
			graphtest.Num(fits.Data, "apiKeys", "edges", 0, "node", "usageCount") != math.MaxInt32 {
			t.Fatalf("2^31-1: %s", fits.Body)
		}
		for _, v := range graphtest.Dig(fits.Data, "apiVersions").([]any) {
			if graphtest.Str(v, "name") == "v2" && graphtest.Num(v, "callsLast30Days") != math.MaxInt32 {
				t.Fatalf("callsLast30Days at 2^31-1: %s", fits.Body)
			}
		}

		usage.Update().SetCount(5_000_000_000).ExecX(ctx)
		a.App.DB.APIKey.Update().SetUsageCount(5_000_000_000).ExecX(ctx)
		beyond := a.GQL(t, q, nil)
		want := map[string]string{"count": "callCount", "usageCount": "requestCount", "callsLast30Days": "callCountLast30Days"}
		for _, e := range beyond.Errors {
			var field string
			if len(e.Path) > 0 {
				field, _ = e.Path[len(e.Path)-1].(string)
			}
			instead, ok := want[field]
			if !ok || e.Code() != "INVALID_STATE" || !strings.Contains(e.Message, instead) {
				t.Errorf("error %q (%s) at %v", e.Message, e.Code(), e.Path)
			}
			delete(want, field)
		}
		if len(want) > 0 {
			t.Errorf("no field error for %v: %s", want, beyond.Body)
		}
	})
}
