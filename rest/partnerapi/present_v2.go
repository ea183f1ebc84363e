package partnerapi

import "gatehouse/internal/order"

// The v2 presenter: v1's shapes plus fields. v2 only adds, so v1 callers
// are unaffected.

// orderV2 is an order as v2 shows it: v1's fields, the times and the
// masked customer (the masking rules are the order domain's).
type orderV2 struct {
	orderV1
	CreateTime   string         `json:"create_time"`
	PayTime      *string        `json:"pay_time"`
	CustomerInfo customerInfoV2 `json:"customer_info"`
}

// customerInfoV2 is the masked customer of an order.
type customerInfoV2 struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
	Email string `json:"email"`
}

func presentOrderV2(o order.Order) orderV2 {
	v := orderV2{
		orderV1:    presentOrderV1(o),
		CreateTime: o.CreateTime.UTC().Format(order.TimeFormat),
		CustomerInfo: customerInfoV2{
			Name:  o.CustomerName,
			Phone: order.MaskPhone(o.CustomerPhone),
			Email: order.MaskEmail(o.CustomerEmail),
		},
	}
	if o.PayTime != nil {
		s := o.PayTime.UTC().Format(order.TimeFormat)
		v.PayTime = &s
	}
	return v
}
