package partnerapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerapi"
	"gatehouse/rest/partnerclient"
)

// v3Removal is when customer_info leaves v3's replies with the version
// table's release day (2026-11-27) and no GATEHOUSE_API_RELEASED.
var v3Removal = time.Date(2027, 5, 27, 0, 0, 0, 0, time.UTC)

// TestV3CustomerInfoTransition: v3 serves the order query and the
// deduction; until 6 months after its release its orders still carry
// customer_info and every reply the Deprecated-Fields header; from the
// removal date on, neither. v2 is unchanged on both sides. The partner
// router runs on the app's services with a clock the test moves (the
// signatures use the real time).
func TestV3CustomerInfoTransition(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		ctx := context.Background()
		app, sec := createApp(t, e, partner.CreateInput{})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "SO3001", Amount: "12.30",
			CustomerName: "Alice Chen", CustomerPhone: "13800000000", CustomerEmail: "alice@example.com"})
		sku, err := e.App.Inventory.CreateSku(ctx, "v3 item", 10)
		if err != nil {
			t.Fatal(err)
		}
		clock := testenv.NewClock(v3Removal.Add(-time.Second))
		h := partnerapi.Partner{Gate: e.App.PartnerGate, Orders: e.App.Orders, Inventory: e.App.Inventory,
			Versions: e.App.APIVersions, Now: clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		r := chi.NewRouter()
		r.Mount(partnerapi.PartnerMountPattern, h.Routes())
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		c := partnerclient.New(srv.URL, app.AppKey, sec)
		c.DeductVersion = "v3"

		const header = `customer_info; removal="2027-05-27"`
		wantInfo := partnerclient.CustomerInfo{Name: "Alice Chen", Phone: "138****0000", Email: "a***@example.com"}

		// A second before the removal date.
		o, err := c.OrderV3(ctx, "SO3001")
		if err != nil || o.CustomerInfo == nil || *o.CustomerInfo != wantInfo || o.DeprecatedFields != header || o.Amount != "12.30" || o.CreateTime.IsZero() {
			t.Fatalf("v3 before the removal: %+v %v", o, err)
		}
		res, err := c.Deduct(ctx, partnerclient.DeductRequest{BizNo: "V3-1", SkuID: int64(sku.ID), Quantity: 2})
		if err != nil || res.RemainingStock != 8 {
			t.Fatalf("v3 deduction: %+v %v", res, err)
		}
		raw, err := c.Do(ctx, "POST", "/api/v3/inventory/deduct", nil)
		if err != nil || raw.HTTPStatus != 400 || raw.Header.Get("Deprecated-Fields") != header || raw.Header.Get("API-Version") != "v3" {
			t.Fatalf("v3 rejected deduction: %+v %v", raw, err)
		}

		// From the removal date on.
		clock.Set(v3Removal)
		raw, err = c.Do(ctx, "GET", "/api/v3/orders/query", map[string][]string{"order_no": {"SO3001"}})
		if err != nil || raw.Code != 200 {
			t.Fatalf("v3 after the removal: %+v %v", raw, err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw.Data, &fields); err != nil {
			t.Fatal(err)
		}
		if _, ok := fields["customer_info"]; ok || len(fields) != 5 || raw.Header.Get("Deprecated-Fields") != "" || raw.Header.Values("Deprecated-Fields") != nil {
			t.Fatalf("v3 after the removal: %s %v", raw.Data, raw.Header)
		}
		o, err = c.OrderV3(ctx, "SO3001")
		if err != nil || o.CustomerInfo != nil || o.DeprecatedFields != "" || o.OrderNo != "SO3001" {
			t.Fatalf("SDK v3 after the removal: %+v %v", o, err)
		}
		// The deduction's records are shared: V3-1 replays, on v1 too.
		res, err = c.Deduct(ctx, partnerclient.DeductRequest{BizNo: "V3-1", SkuID: int64(sku.ID), Quantity: 2})
		if err != nil || !res.Replayed || res.RemainingStock != 8 {
			t.Fatalf("v3 replay: %+v %v", res, err)
		}
		c.DeductVersion = ""
		if res, err = c.Deduct(ctx, partnerclient.DeductRequest{BizNo: "V3-1", SkuID: int64(sku.ID), Quantity: 2}); err != nil || !res.Replayed {
			t.Fatalf("v1 replay of a v3 deduction: %+v %v", res, err)
		}

		// v2 keeps customer_info, without the header, on both sides.
		for _, at := range []time.Time{v3Removal.Add(-time.Second), v3Removal} {
			clock.Set(at)
			raw, err := c.Do(ctx, "GET", "/api/v2/orders/query", map[string][]string{"order_no": {"SO3001"}})
			if err != nil || raw.Code != 200 || raw.Header.Get("Deprecated-Fields") != "" || raw.Header.Get("Deprecation") != "" {
				t.Fatalf("v2 at %s: %+v %v", at, raw, err)
			}
			var o partnerclient.OrderV2
			if err := json.Unmarshal(raw.Data, &o); err != nil || o.CustomerInfo != wantInfo {
				t.Fatalf("v2 at %s: %s", at, raw.Data)
			}
		}
	})
}

// TestV3ThroughTheApp: the running app serves /api/v3/ with the version
// table's release day (or GATEHOUSE_API_RELEASED's), on the real clock.
func TestV3ThroughTheApp(t *testing.T) {
	for _, c := range []struct {
		released string
		removal  time.Time
	}{
		{"", v3Removal},
		{"v3=2026-12-01", time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)},
	} {
		e := apptest.Start(t, testenv.Backend{Name: "sqlite"}, func(cfg *config.Config) { cfg.API.Released = c.released })
		app, sec := createApp(t, e, partner.CreateInput{})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "SO3002", Amount: "1", CustomerName: "Bo"})
		o, err := client(e, app.AppKey, sec).OrderV3(context.Background(), "SO3002")
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().Before(c.removal) {
			want := `customer_info; removal="` + c.removal.Format(time.DateOnly) + `"`
			if o.CustomerInfo == nil || o.CustomerInfo.Name != "Bo" || o.DeprecatedFields != want {
				t.Fatalf("released %q: %+v, want Deprecated-Fields %s", c.released, o, want)
			}
		} else if o.CustomerInfo != nil || o.DeprecatedFields != "" {
			t.Fatalf("released %q, after the removal: %+v", c.released, o)
		}
	}
}
