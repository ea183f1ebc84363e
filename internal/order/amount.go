package order

import (
	"strconv"

	"gatehouse/internal/errs"
)

// MaxAmountIntegerDigits keeps amounts below 10^13 units (10^15 minor
// units), where every value is exact in a float64, so partners parsing the
// JSON number as a double lose nothing.
const MaxAmountIntegerDigits = 13

// ParseAmount reads a decimal amount with at most two decimals ("99.90",
// "99.9", "100", "0.05") into minor units. Signs, exponents, spaces,
// separators and a third decimal are refused.
func ParseAmount(s string) (int64, error) {
	intPart, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			intPart, frac = s[:i], s[i+1:]
			if frac == "" {
				return 0, errs.Invalid("amount", "must be a decimal number like 99.90")
			}
			break
		}
	}
	if intPart == "" || len(intPart) > MaxAmountIntegerDigits || !digits(intPart) || !digits(frac) {
		return 0, errs.Invalid("amount", "must be a non-negative decimal number like 99.90, below 10^%d", MaxAmountIntegerDigits)
	}
	if len(frac) > 2 {
		return 0, errs.Invalid("amount", "must have at most two decimals")
	}
	for len(frac) < 2 {
		frac += "0"
	}
	units, _ := strconv.ParseInt(intPart, 10, 64)
	cents, _ := strconv.ParseInt(frac, 10, 64)
	return units*100 + cents, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatAmount renders minor units with two decimals: 9990 → "99.90".
func FormatAmount(minor int64) string {
	neg := minor < 0
	if neg {
		minor = -minor
	}
	s := strconv.FormatInt(minor/100, 10) + "." + strconv.FormatInt(minor%100/10, 10) + strconv.FormatInt(minor%10, 10)
	if neg {
		s = "-" + s
	}
	return s
}

// Amount is minor units that encode as a JSON number with two decimals
// (99.90, not 99.9 or "99.90").
type Amount int64

// MarshalJSON implements json.Marshaler.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(FormatAmount(int64(a))), nil }
