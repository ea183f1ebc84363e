package order

import (
	"strings"
	"unicode/utf8"
)

// TimeFormat is how order times are rendered: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// V1 is the v1 shape of an order.
type V1 struct {
	OrderNo string `json:"order_no"`
	Amount  Amount `json:"amount"`
	Status  Status `json:"status"`
}

// CustomerInfo is the masked customer of an order (v2).
type CustomerInfo struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
	Email string `json:"email"`
}

// V2 is the v2 shape: v1 plus the times and the masked customer. v2 only
// adds fields, so v1 callers are unaffected.
type V2 struct {
	OrderNo      string       `json:"order_no"`
	Amount       Amount       `json:"amount"`
	Status       Status       `json:"status"`
	CreateTime   string       `json:"create_time"`
	PayTime      *string      `json:"pay_time"`
	CustomerInfo CustomerInfo `json:"customer_info"`
}

// RenderV1 returns the v1 shape of o.
func RenderV1(o Order) V1 {
	return V1{OrderNo: o.OrderNo, Amount: Amount(o.Amount), Status: o.Status}
}

// RenderV2 returns the v2 shape of o.
func RenderV2(o Order) V2 {
	v := V2{
		OrderNo:    o.OrderNo,
		Amount:     Amount(o.Amount),
		Status:     o.Status,
		CreateTime: o.CreateTime.UTC().Format(TimeFormat),
		CustomerInfo: CustomerInfo{
			Name:  o.CustomerName,
			Phone: MaskPhone(o.CustomerPhone),
			Email: MaskEmail(o.CustomerEmail),
		},
	}
	if o.PayTime != nil {
		s := o.PayTime.UTC().Format(TimeFormat)
		v.PayTime = &s
	}
	return v
}

// MaskPhone keeps the first three and last four characters of a phone
// number of 8 or more characters: 13800000000 → 138****0000. Shorter
// numbers keep only their last two (or nothing below 4): ****12.
func MaskPhone(p string) string {
	r := []rune(p)
	switch n := len(r); {
	case n == 0:
		return ""
	case n >= 8:
		return string(r[:3]) + "****" + string(r[n-4:])
	case n >= 4:
		return "****" + string(r[n-2:])
	default:
		return "****"
	}
}

// MaskEmail keeps the first character of the local part and the domain:
// alice@example.com → a***@example.com.
func MaskEmail(e string) string {
	if e == "" {
		return ""
	}
	local, domain, ok := strings.Cut(e, "@")
	if !ok || local == "" {
		return "***"
	}
	first, _ := utf8.DecodeRuneInString(local)
	return string(first) + "***@" + domain
}
