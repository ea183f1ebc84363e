package partnerapi

import "gatehouse/internal/order"

// The v3 presenter: v2's shapes without customer_info, which v3 removes.
// For 6 months from v3's release its replies still carry it (the
// transition period, see PartnerVersion.Removes).

// fieldCustomerInfo is the field v3 removes.
const fieldCustomerInfo = "customer_info"

// orderV3 is an order as v3 shows it.
type orderV3 struct {
	orderV1
	CreateTime string  `json:"create_time"`
	PayTime    *string `json:"pay_time"`
	// CustomerInfo is v2's, present during the transition period only.
	CustomerInfo *customerInfoV2 `json:"customer_info,omitempty"`
}

func presentOrderV3(o order.Order, carries Carries) orderV3 {
	v2 := presentOrderV2(o)
	v := orderV3{orderV1: v2.orderV1, CreateTime: v2.CreateTime, PayTime: v2.PayTime}
	if carries(fieldCustomerInfo) {
		v.CustomerInfo = &v2.CustomerInfo
	}
	return v
}
