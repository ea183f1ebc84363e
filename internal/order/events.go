package order

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
