package redact

import (
	"strconv"
	"unicode/utf8"
)

// maxEcho is how many characters of a caller's value an error message
// repeats.
const maxEcho = 64

// Echo quotes a caller's value for an error message: Go-quoted (control
// characters escaped, so it cannot break a line or a terminal) and cut to
// its first maxEcho characters followed by "…", so that a megabyte of
// input does not come back in the reply, the audit log and the logs.
func Echo(s string) string {
	if utf8.RuneCountInString(s) <= maxEcho {
		return strconv.Quote(s)
	}
	n, i := 0, 0
	for i = range s {
		if n == maxEcho {
			break
		}
		n++
	}
	return strconv.Quote(s[:i]) + "…"
}
