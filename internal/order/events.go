package order

import (
	"encoding/json"
	"strings"

	"gatehouse/internal/webhook"
)

// The bizData of the order webhooks. Every event carries the order as it
// is after the change (the v1 fields and its times, RFC 3339 UTC with
// milliseconds) and the time of the change; docs/webhooks.md shows them.

// PaidEvent is the bizData of an order.paid webhook.
type PaidEvent struct {
	OrderNo    string `json:"order_no"`
	Amount     Amount `json:"amount"`
	Status     Status `json:"status"`
	CreateTime string `json:"create_time"`
	PayTime    string `json:"pay_time"`
}

// RefundedEvent is the bizData of an order.refunded webhook.
type RefundedEvent struct {
	OrderNo    string `json:"order_no"`
	Amount     Amount `json:"amount"`
	Status     Status `json:"status"` // REFUNDED
	CreateTime string `json:"create_time"`
	PayTime    string `json:"pay_time"`
	RefundTime string `json:"refund_time"`
	// Reason is the operator's reason given to refundOrder ("" when none).
	Reason string `json:"reason"`
}

// CancelledEvent is the bizData of an order.cancelled webhook.
type CancelledEvent struct {
	OrderNo    string `json:"order_no"`
	Amount     Amount `json:"amount"`
	Status     Status `json:"status"` // CANCELLED
	CreateTime string `json:"create_time"`
	CancelTime string `json:"cancel_time"`
}

// The order events' types. The order package raises them and declares them
// (EventTypes); the webhook package sends them as data.
const (
	// EventPaid is sent when an order moves from CREATED to PAID.
	EventPaid = "order.paid"
	// EventRefunded is sent when a PAID order is refunded.
	EventRefunded = "order.refunded"
	// EventCancelled is sent when a CREATED order is cancelled.
	EventCancelled = "order.cancelled"
)

// The JSON Schema pieces of the order events' bizData.
const (
	orderNoSchema = `"order_no":{"type":"string","minLength":1,"maxLength":64,"description":"The order number."}`
	amountSchema  = `"amount":{"type":"number","minimum":0,"description":"The amount, a number with two decimals (99.90)."}`
	timeSchema    = `{"type":"string","format":"date-time","description":"RFC 3339, UTC, milliseconds."}`
)

func statusSchema(s Status) string {
	return `"status":{"const":"` + string(s) + `","description":"The order's status after the change."}`
}

func eventSchema(required []string, props ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","required":` + string(req) + `,"properties":{` + strings.Join(props, ",") + `}}`)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// EventTypes are the order events of the webhook catalogue (built-in
// types): names, meanings, the JSON Schema of their bizData and an example.
// TestEventTypesDescribeThePayloads keeps each schema in step with its
// payload struct.
func EventTypes() []webhook.EventType {
	const created, paid = "2026-11-22T10:43:47.120Z", "2026-11-22T10:43:58.278Z"
	return []webhook.EventType{{
		Name:        EventPaid,
		Description: "An order was paid (payOrder: CREATED → PAID).",
		Schema: eventSchema([]string{"order_no", "amount", "status", "create_time", "pay_time"},
			orderNoSchema, amountSchema, statusSchema(Paid), `"create_time":`+timeSchema, `"pay_time":`+timeSchema),
		Example: mustJSON(PaidEvent{OrderNo: "SO1001", Amount: 9990, Status: Paid, CreateTime: created, PayTime: paid}),
	}, {
		Name:        EventRefunded,
		Description: "A paid order was refunded (refundOrder, once the payment provider accepted: PAID → REFUNDED).",
		Schema: eventSchema([]string{"order_no", "amount", "status", "create_time", "pay_time", "refund_time", "reason"},
			orderNoSchema, amountSchema, statusSchema(Refunded), `"create_time":`+timeSchema, `"pay_time":`+timeSchema,
			`"refund_time":`+timeSchema, `"reason":{"type":"string","maxLength":256,"description":"The operator's reason, \"\" when none."}`),
		Example: mustJSON(RefundedEvent{OrderNo: "SO1001", Amount: 9990, Status: Refunded, CreateTime: created, PayTime: paid,
			RefundTime: "2026-11-23T09:30:00.123Z", Reason: "damaged in transit"}),
	}, {
		Name:        EventCancelled,
		Description: "An order was cancelled before it was paid (cancelOrder: CREATED → CANCELLED).",
		Schema: eventSchema([]string{"order_no", "amount", "status", "create_time", "cancel_time"},
			orderNoSchema, amountSchema, statusSchema(Cancelled), `"create_time":`+timeSchema, `"cancel_time":`+timeSchema),
		Example: mustJSON(CancelledEvent{OrderNo: "SO1002", Amount: 1500, Status: Cancelled, CreateTime: created, CancelTime: "2026-11-23T09:30:00.123Z"}),
	}}
}
