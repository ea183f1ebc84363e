package partnerapi

import (
	"encoding/json"
	"testing"
	"time"

	"gatehouse/internal/order"
)

// TestPresenters: each version's order shape, field by field and in
// order; v2 is v1 plus fields; v3 is v2 whose customer_info goes at the
// end of the transition period.
func TestPresenters(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.FixedZone("CST", 8*3600))
	paid := order.Order{OrderNo: "SO1", Amount: 9990, Status: order.Paid, CreateTime: at, PayTime: &at,
		CustomerName: "Ann", CustomerPhone: "13800000000", CustomerEmail: "ann@example.com"}
	unpaid := paid
	unpaid.Status, unpaid.PayTime = order.Created, nil
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"v1", presentOrderV1(paid), `{"order_no":"SO1","amount":99.90,"status":"PAID"}`},
		{"v2", presentOrderV2(paid), `{"order_no":"SO1","amount":99.90,"status":"PAID","create_time":"2026-11-22T02:00:00.123Z","pay_time":"2026-11-22T02:00:00.123Z","customer_info":{"name":"Ann","phone":"138****0000","email":"a***@example.com"}}`},
		{"v2 unpaid", presentOrderV2(unpaid), `{"order_no":"SO1","amount":99.90,"status":"CREATED","create_time":"2026-11-22T02:00:00.123Z","pay_time":null,"customer_info":{"name":"Ann","phone":"138****0000","email":"a***@example.com"}}`},
		{"v3 in the transition", presentOrderV3(paid, func(string) bool { return true }), `{"order_no":"SO1","amount":99.90,"status":"PAID","create_time":"2026-11-22T02:00:00.123Z","pay_time":"2026-11-22T02:00:00.123Z","customer_info":{"name":"Ann","phone":"138****0000","email":"a***@example.com"}}`},
		{"v3", presentOrderV3(unpaid, func(f string) bool { return f != "customer_info" }), `{"order_no":"SO1","amount":99.90,"status":"CREATED","create_time":"2026-11-22T02:00:00.123Z","pay_time":null}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: %s %v\nwant %s", c.name, b, err, c.want)
		}
	}
}

// TestV1PresenterNeedsOnlySummary: the v1 order query reads only the
// order.Summary fields (partner_api.go), so the v1 presenter must show
// nothing else: its reply from a summary equals its reply from the whole
// order. A v1 field taken from the customer or the times fails here
// instead of answering empty values.
func TestV1PresenterNeedsOnlySummary(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	full := order.Order{ID: 7, OrderNo: "SO1", AppID: 3, Amount: 9990, Status: order.Paid, CreateTime: at, PayTime: &at,
		CustomerName: "Ann", CustomerPhone: "13800000000", CustomerEmail: "ann@example.com"}
	summary := order.Order{ID: full.ID, OrderNo: full.OrderNo, AppID: full.AppID, Amount: full.Amount, Status: full.Status}
	if got, want := presentOrderV1(summary), presentOrderV1(full); got != want {
		t.Fatalf("v1 from a summary %+v, from the whole order %+v", got, want)
	}
}
