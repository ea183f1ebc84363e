package partnerapi

import (
	"strconv"
	"unicode/utf8"

	"gatehouse/internal/inventory"
	"gatehouse/internal/order"
)

// jsonAppender is reply data that writes its own JSON: byte for byte what
// encoding/json (with HTML escaping off, as the envelope's encoder is)
// writes for it, without reflection. The replies every partner call makes
// (the order query in each version, the deduction) implement it; any
// other data goes through encoding/json. TestAppendJSONMatchesEncodingJSON
// holds the two together.
type jsonAppender interface {
	appendJSON(b []byte) []byte
}

// appendEnvelope appends e and the newline json.Encoder ends with; e.Data
// is nil or a jsonAppender.
func appendEnvelope(b []byte, e *Envelope) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, e.Message)
	if d, ok := e.Data.(jsonAppender); ok {
		b = append(b, `,"data":`...)
		b = d.appendJSON(b)
	}
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, e.Timestamp, 10)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, e.RequestID)
	return append(b, "}\n"...)
}

func (o orderV1) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = o.appendFields(b)
	return append(b, '}')
}

func (o orderV1) appendFields(b []byte) []byte {
	b = append(b, `"order_no":`...)
	b = appendJSONString(b, o.OrderNo)
	b = append(b, `,"amount":`...)
	b = append(b, order.FormatAmount(int64(o.Amount))...)
	b = append(b, `,"status":`...)
	return appendJSONString(b, string(o.Status))
}

func (o orderV2) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = o.orderV1.appendFields(b)
	b = appendTimes(b, o.CreateTime, o.PayTime)
	b = append(b, `,"customer_info":`...)
	b = o.CustomerInfo.appendJSON(b)
	return append(b, '}')
}

// appendJSON of orderV3: without it, the embedded orderV1's would write
// v1's fields only.
func (o orderV3) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = o.orderV1.appendFields(b)
	b = appendTimes(b, o.CreateTime, o.PayTime)
	if o.CustomerInfo != nil {
		b = append(b, `,"customer_info":`...)
		b = o.CustomerInfo.appendJSON(b)
	}
	return append(b, '}')
}

// appendTimes appends the create_time and pay_time members.
func appendTimes(b []byte, create string, pay *string) []byte {
	b = append(b, `,"create_time":`...)
	b = appendJSONString(b, create)
	b = append(b, `,"pay_time":`...)
	if pay == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *pay)
}

func (c customerInfoV2) appendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, c.Name)
	b = append(b, `,"phone":`...)
	b = appendJSONString(b, c.Phone)
	b = append(b, `,"email":`...)
	b = appendJSONString(b, c.Email)
	return append(b, '}')
}

// deductionReply is a deduction's success data (the fields and tags of
// inventory.Deduction).
type deductionReply inventory.Deduction

func (d deductionReply) appendJSON(b []byte) []byte {
	b = append(b, `{"biz_no":`...)
	b = appendJSONString(b, d.BizNo)
	b = append(b, `,"sku_id":`...)
	b = strconv.AppendInt(b, int64(d.SkuID), 10)
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, d.Quantity, 10)
	b = append(b, `,"remaining_stock":`...)
	b = strconv.AppendInt(b, d.RemainingStock, 10)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json does
// with HTML escaping off: `"` and `\` escaped, control characters as \b,
// \f, \n, \r, \t or \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 as
// \u2028 and \u2029, everything else as it is.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
