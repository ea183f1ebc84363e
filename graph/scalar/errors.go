package scalar

// InputError is the error of a custom scalar input that cannot be read (an
// ID, an Int64, a Time: wrong type, bad format, out of range). It says what
// the value must be and does not echo it (it may be long, and strconv's or
// time's text says nothing to a caller); the admin layer shows it as
// VALIDATION_FAILED naming the argument or input field it was given for.
type InputError struct {
	// Scalar is the scalar's name in the schema ("ID", "Int64", "Time").
	Scalar string
	msg    string
}

func (e *InputError) Error() string { return e.msg }

// The errors of the scalars' inputs, one each.
var (
	// ErrID: not a whole number, or one beyond any id (ids are 64-bit).
	ErrID = &InputError{Scalar: "ID", msg: "must be an ID: a whole number of at most 19 digits, up to 9223372036854775807"}
	// ErrInt64: not a whole number, or one beyond 64 bits.
	ErrInt64 = &InputError{Scalar: "Int64", msg: `must be an Int64: a whole number from -9223372036854775808 to 9223372036854775807, as a string of digits ("999999999999999") or an integer`}
	// ErrTime: not a string, or one that is no RFC 3339 time or date.
	ErrTime = &InputError{Scalar: "Time", msg: "must be a Time: a string, RFC 3339 (2026-11-22T10:00:00Z) or a date (2026-11-22)"}
)
