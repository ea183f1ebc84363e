package partner

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"gatehouse/internal/secret"
)

// The four signing parameters every call to /api/v{n}/ carries, and the
// optional parameter that selects the digest. sign_type is signed like any
// business parameter.
const (
	ParamAppKey    = "app_key"
	ParamTimestamp = "timestamp"
	ParamNonce     = "nonce"
	ParamSign      = "sign"
	ParamSignType  = "sign_type"
)

// SignType selects the digest of a signature.
type SignType int

// The digests. MD5 is the partner API's original scheme and the default; HMAC-SHA256 is
// the stronger option a partner opts into with sign_type=HMAC-SHA256.
const (
	SignMD5 SignType = iota
	SignHMACSHA256
)

// String returns the sign_type spelling of t.
func (t SignType) String() string {
	if t == SignHMACSHA256 {
		return "HMAC-SHA256"
	}
	return "MD5"
}

// ParseSignType reads a sign_type value: empty (absent) or MD5 selects
// MD5, HMAC-SHA256 selects HMAC-SHA256; case is ignored.
func ParseSignType(v string) (SignType, error) {
	switch {
	case v == "" || strings.EqualFold(v, "MD5"):
		return SignMD5, nil
	case strings.EqualFold(v, "HMAC-SHA256"):
		return SignHMACSHA256, nil
	}
	return 0, errors.New("sign_type must be MD5 or HMAC-SHA256")
}

// Param is one business parameter, URL-decoded.
type Param struct {
	Name, Value string
}

// SignedQuery is the query string of a signed request, split into the
// signing parameters and the business parameters. A missing parameter and
// an empty one both read as "".
type SignedQuery struct {
	AppKey, Timestamp, Nonce, Sign string
	// Params are every other parameter (sign_type included), sorted by name
	// in ascending byte order: the order they are signed in.
	Params []Param
	// Duplicate is the first parameter name given more than once, or "".
	// Such a request cannot verify: which value was meant is ambiguous.
	Duplicate string
	// Malformed reports a segment that is not valid URL encoding; it is
	// skipped, and the request cannot verify.
	Malformed bool
}

// Get returns the value of business parameter name and whether it was given.
func (q *SignedQuery) Get(name string) (string, bool) {
	i, ok := slices.BinarySearchFunc(q.Params, name, func(p Param, n string) int { return strings.Compare(p.Name, n) })
	if !ok {
		return "", false
	}
	return q.Params[i].Value, true
}

// ParseSignedQuery splits a raw query string (without the leading "?") on
// "&" and form-decodes each name and value ("+" is a space, %XX a byte).
// Only "&" separates parameters: a ";" is data. Empty segments are
// skipped. It never fails; problems are reported in the result so that the
// checks keep their documented order.
func ParseSignedQuery(raw string) SignedQuery {
	var q SignedQuery
	seen := make(map[string]struct{}, 8)
	for raw != "" {
		var seg string
		seg, raw, _ = strings.Cut(raw, "&")
		if seg == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(seg, "=")
		name, err1 := url.QueryUnescape(rawName)
		value, err2 := url.QueryUnescape(rawValue)
		if err1 != nil || err2 != nil {
			q.Malformed = true
			continue
		}
		if _, dup := seen[name]; dup {
			if q.Duplicate == "" {
				q.Duplicate = name
			}
			continue
		}
		seen[name] = struct{}{}
		switch name {
		case ParamAppKey:
			q.AppKey = value
		case ParamTimestamp:
			q.Timestamp = value
		case ParamNonce:
			q.Nonce = value
		case ParamSign:
			q.Sign = value
		default:
			q.Params = append(q.Params, Param{Name: name, Value: value})
		}
	}
	slices.SortFunc(q.Params, func(a, b Param) int { return strings.Compare(a.Name, b.Name) })
	return q
}

// Canonical returns the string that is signed, without the secret:
// timestamp, nonce, then every business parameter's name immediately
// followed by its value, in the order of params (sorted by name).
func Canonical(timestamp, nonce string, params []Param) string {
	n := len(timestamp) + len(nonce)
	for _, p := range params {
		n += len(p.Name) + len(p.Value)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(timestamp)
	b.WriteString(nonce)
	for _, p := range params {
		b.WriteString(p.Name)
		b.WriteString(p.Value)
	}
	return b.String()
}

// Digest returns the lower-case hex signature of canonical under secret:
// MD5(secret + canonical), or HMAC-SHA256 keyed by secret over canonical.
func Digest(t SignType, secret []byte, canonical string) string {
	if t == SignHMACSHA256 {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(canonical))
		return hex.EncodeToString(m.Sum(nil))
	}
	h := md5.New()
	h.Write(secret)
	h.Write([]byte(canonical))
	return hex.EncodeToString(h.Sum(nil))
}

// Explain returns the text a 4002 shows so that a partner can find their
// mistake: what the server signed, with the secret written as <secret>.
func Explain(t SignType, canonical string) string {
	if t == SignHMACSHA256 {
		return "sign must be the lower-case hex HMAC-SHA256, keyed by <secret>, of: " + canonical
	}
	return "sign must be the lower-case hex MD5 of: <secret>" + canonical
}

// verify checks the sign of q against every secret valid at now.
func verify(q *SignedQuery, cred *credentials, now time.Time) *RejectError {
	switch {
	case q.Malformed:
		return reject(ErrBadSignature, "the query string is not valid URL encoding")
	case q.Duplicate != "":
		return reject(ErrBadSignature, "parameter %q is given more than once", q.Duplicate)
	}
	st, err := ParseSignType(signTypeOf(q))
	if err != nil {
		return reject(ErrBadSignature, "%v", err)
	}
	canonical := Canonical(q.Timestamp, q.Nonce, q.Params)
	if q.Sign == "" {
		return reject(ErrBadSignature, "sign is missing; %s", Explain(st, canonical))
	}
	ok := false
	for _, sec := range cred.secretsAt(now) {
		// Every valid secret is tried, so the time taken does not tell
		// which one matched.
		if secret.EqualHexFold(q.Sign, Digest(st, sec, canonical)) {
			ok = true
		}
	}
	if !ok {
		return reject(ErrBadSignature, "%s", Explain(st, canonical))
	}
	return nil
}

func signTypeOf(q *SignedQuery) string {
	v, _ := q.Get(ParamSignType)
	return v
}
