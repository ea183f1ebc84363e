package order

// How order data is shown to partners: the masking rules of customer data
// are the domain's; the reply shapes of each API version are rest's
// presenters.

import (
	"strings"
	"unicode/utf8"
)

// TimeFormat is how order times are written (partner replies, webhook
// payloads): RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

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
