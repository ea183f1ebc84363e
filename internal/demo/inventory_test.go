package demo_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"gatehouse/ent/sku"
	"gatehouse/internal/testenv"
)

// TestDemoInventory: seeding twice creates the demo SKUs once, and the
// printed ready-made deduction works and deducts.
func TestDemoInventory(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		a, _, text := seedAndServe(t, b)
		if n, err := a.DB.Sku.Query().Where(sku.Name("Demo mug")).Count(ctx); err != nil || n != 1 {
			t.Fatalf("%d demo mugs after seeding twice (%v), want 1", n, err)
		}
		ready := regexp.MustCompile(`(?m)^curl -s -X POST '([^']+/api/v1/inventory/deduct\?[^']+)'$`).FindStringSubmatch(text)
		if ready == nil {
			t.Fatalf("no ready-made deduction in:\n%s", text)
		}
		resp, err := http.Post(ready[1], "", nil)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Code int `json:"code"`
			Data struct {
				Quantity       int64 `json:"quantity"`
				RemainingStock int64 `json:"remaining_stock"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil || env.Code != 200 || env.Data.Quantity != 2 || env.Data.RemainingStock != 98 {
			t.Fatalf("ready-made deduction: %+v %v\n%s", env, err, text)
		}
	})
}
