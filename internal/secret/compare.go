package secret

import "crypto/subtle"

// Equal reports whether a and b are equal, in time that depends only on
// their lengths, not their contents, so a caller probing a secret learns
// nothing from timing but its length. Compare fixed-length values (hashes)
// when the length itself must stay hidden.
func Equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// EqualHexFold reports whether a and b are the same hex string, ignoring
// case ("ABC1" equals "abc1"), in time that depends only on their length.
// It is for signatures sent in either case, such as the partner API's MD5
// sign. Strings of different lengths, or holding anything but hex digits,
// are not equal: a case-folding shortcut like c|0x20 would otherwise equal
// "\x10" to "0".
func EqualHexFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	diff, valid := 0, 1
	for i := 0; i < len(a); i++ {
		va, oka := hexValue(a[i])
		vb, okb := hexValue(b[i])
		diff |= va ^ vb
		valid &= oka & okb
	}
	return diff == 0 && valid == 1
}

// hexValue returns the value of hex digit c and 1, or 0 and 0 when c is not
// a hex digit, without branching on c.
func hexValue(c byte) (value, ok int) {
	x := int(c)
	isDigit := subtle.ConstantTimeLessOrEq('0', x) & subtle.ConstantTimeLessOrEq(x, '9')
	lower := x | 0x20 // folds 'A'-'F' onto 'a'-'f'; only trusted together with the range check
	isLetter := subtle.ConstantTimeLessOrEq('a', lower) & subtle.ConstantTimeLessOrEq(lower, 'f')
	value = subtle.ConstantTimeSelect(isDigit, x-'0', 0) | subtle.ConstantTimeSelect(isLetter, lower-'a'+10, 0)
	return value, isDigit | isLetter
}
