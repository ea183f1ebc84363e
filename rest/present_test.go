package rest

import (
	"encoding/json"
	"testing"
	"time"

	"gatehouse/internal/order"
)

// TestPresenters: each version's order shape, field by field and in
// order; v2 is v1 plus fields.
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
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: %s %v\nwant %s", c.name, b, err, c.want)
		}
	}
}
