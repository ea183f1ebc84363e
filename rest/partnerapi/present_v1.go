package partnerapi

import "gatehouse/internal/order"

// The v1 presenter: the shapes version 1 of the partner API replies with.

// orderV1 is an order as v1 shows it.
type orderV1 struct {
	OrderNo string       `json:"order_no"`
	Amount  order.Amount `json:"amount"`
	Status  order.Status `json:"status"`
}

func presentOrderV1(o order.Order) orderV1 {
	return orderV1{OrderNo: o.OrderNo, Amount: order.Amount(o.Amount), Status: o.Status}
}
