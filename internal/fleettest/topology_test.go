package fleettest_test

import (
	"context"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/testenv/fleet"
)

// TestTopologies runs the partner API (signed query, replay refused, rate
// state), sign-in (login throttle counters, logout deny-list), the
// deduction and a refund (its once-only lock) on a 3-master Redis Cluster
// and on a Sentinel group, through their URLs. On the cluster, the app's
// keys share one slot and every other key is single: no CROSSSLOT or MOVED
// error reaches a caller. /readyz writes a probe key on every master.
func TestTopologies(t *testing.T) {
	t.Parallel()
	for _, topo := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"cluster", func(t *testing.T) string { return fleet.StartCluster(t, 3).URL() }},
		{"sentinel", func(t *testing.T) string { return fleet.StartSentinelGroup(t).URL() }},
	} {
		t.Run(topo.name, func(t *testing.T) {
			t.Parallel()
			provider := paymenttest.New(t)
			f := setup(t, topo.url(t), func(c *config.Config) {
				c.Webhooks.AllowPrivate = true
				c.Payments.URL, c.Payments.APIKey, c.Payments.Secret = provider.URL, provider.APIKey, provider.Secret
			})
			ctx := context.Background()
			if st, m := f.readyz(t); st != 200 || m["kv"] != "ok" || m["replay_memory_start"] == "" {
				t.Fatalf("readyz: %d %v", st, m)
			}

			// Partner: concurrent signed queries all admitted; a replay refused.
			var wg sync.WaitGroup
			results := make([]result, 20)
			for i := range results {
				wg.Go(func() { _, results[i] = f.query(t) })
			}
			wg.Wait()
			for i, r := range results {
				if !admitted(r) {
					t.Fatalf("signed query %d: %s", i, r)
				}
			}
			u, r := f.query(t)
			if !admitted(r) {
				t.Fatalf("signed query: %s", r)
			}
			if r := f.call("GET", u); r.status != 401 || r.code != 4004 {
				t.Fatalf("replayed signed query: %s, want 401/4004", r)
			}

			// Deduction, and its idempotent repeat.
			deduct := func(bizNo string) result {
				return f.call("POST", f.signedURL(t, "POST", "/api/v1/inventory/deduct", url.Values{
					"biz_no": {bizNo}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"2"},
				}))
			}
			if r := deduct("B-1"); r.status != 200 || r.code != 200 {
				t.Fatalf("deduct: %s", r)
			}
			if r := deduct("B-1"); r.status != 200 || r.code != 200 {
				t.Fatalf("deduct repeat: %s", r)
			}
			if sku, err := f.App.Inventory.Sku(ctx, f.skuID); err != nil || sku.Stock != 998 {
				t.Fatalf("stock after one deduction of 2: %+v %v", sku, err)
			}

			// Sign-in: a failed attempt (throttle counters), a login, the
			// token works; logout puts it on the deny-list.
			if r := f.Do(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"`+userName+`","password":"wrong password"}`, "Content-Type", "application/json"); r.Status != 401 {
				t.Fatalf("wrong password: %d %s", r.Status, r.Body)
			}
			tok := f.login(t)
			if st := f.me(t, tok); st != 200 {
				t.Fatalf("me: %d", st)
			}
			if r := f.Do(t, "POST", f.PublicURL+"/auth/logout", "", "Authorization", "Bearer "+tok); r.Status/100 != 2 {
				t.Fatalf("logout: %d %s", r.Status, r.Body)
			}
			if st := f.me(t, tok); st != 401 {
				t.Fatalf("me after logout: %d", st)
			}

			// Refund of a paid order: one provider call under its lock.
			if _, err := f.App.Orders.Create(ctx, order.CreateInput{AppID: f.app.ID, OrderNo: "R-1", Amount: "9.90"}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.App.Orders.Pay(ctx, "R-1"); err != nil {
				t.Fatal(err)
			}
			o, err := f.App.Payments.Refund(ctx, "R-1", "fleet")
			if err != nil || string(o.Status) != "REFUNDED" {
				t.Fatalf("refund: %+v %v", o, err)
			}
			if n := len(provider.Calls()); n != 1 {
				t.Fatalf("%d provider calls, want 1", n)
			}
		})
	}
}
