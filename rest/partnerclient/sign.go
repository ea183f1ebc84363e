// Package partnerclient is a Go client for gatehouse's signed partner API:
// it signs requests (MD5, the default, or HMAC-SHA256) and calls the order
// query (v1, v2) and the stock deduction.
//
// It depends on the standard library only, so partners can vendor or copy
// it. The signing rule, for a request with business parameters p:
//
//	canonical = timestamp + nonce + name1 + value1 + name2 + value2 …   (names sorted by byte order)
//	sign      = hex(MD5(secret + canonical))                           (default)
//	sign      = hex(HMAC-SHA256(secret, canonical))                    (sign_type=HMAC-SHA256, itself a signed parameter)
//
// and the request carries app_key, timestamp (Unix milliseconds), nonce and
// sign as query parameters next to p.
package partnerclient

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SignType selects the signature digest.
type SignType string

// The digests the server accepts.
const (
	MD5        SignType = "MD5"
	HMACSHA256 SignType = "HMAC-SHA256"
)

// The signing parameters.
const (
	ParamAppKey    = "app_key"
	ParamTimestamp = "timestamp"
	ParamNonce     = "nonce"
	ParamSign      = "sign"
	ParamSignType  = "sign_type"
)

// Signer signs requests for one app.
type Signer struct {
	AppKey    string
	AppSecret string
	// SignType is MD5 when empty. HMAC-SHA256 adds sign_type=HMAC-SHA256.
	SignType SignType
	// Now and Nonce default to the wall clock and 16 random bytes in hex.
	Now   func() time.Time
	Nonce func() string
}

// NewNonce returns 16 random bytes in hex.
func NewNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails since Go 1.24
	return hex.EncodeToString(b)
}

// Sign returns a copy of params with app_key, timestamp, nonce and sign
// added (and sign_type when the signer uses HMAC-SHA256 and params does not
// name a sign_type already). params must not hold the four signing
// parameters, and each name at most once: the server refuses repeated names.
func (s Signer) Sign(params url.Values) (url.Values, error) {
	out := make(url.Values, len(params)+5)
	for name, vs := range params {
		switch name {
		case ParamAppKey, ParamTimestamp, ParamNonce, ParamSign:
			return nil, fmt.Errorf("partnerclient: parameter %q is added by the signer", name)
		}
		if len(vs) != 1 {
			return nil, fmt.Errorf("partnerclient: parameter %q must have exactly one value (has %d)", name, len(vs))
		}
		out[name] = []string{vs[0]}
	}
	st := s.SignType
	if v, ok := out[ParamSignType]; ok {
		st = SignType(v[0])
	} else if strings.EqualFold(string(st), string(HMACSHA256)) {
		out.Set(ParamSignType, string(HMACSHA256))
	}
	now, nonce := time.Now, NewNonce
	if s.Now != nil {
		now = s.Now
	}
	if s.Nonce != nil {
		nonce = s.Nonce
	}
	ts := strconv.FormatInt(now().UnixMilli(), 10)
	n := nonce()
	sign, err := Signature(st, s.AppSecret, ts, n, out)
	if err != nil {
		return nil, err
	}
	out.Set(ParamAppKey, s.AppKey)
	out.Set(ParamTimestamp, ts)
	out.Set(ParamNonce, n)
	out.Set(ParamSign, sign)
	return out, nil
}

// SignURL signs the query parameters already in rawURL and returns the URL
// with the signing parameters added.
func (s Signer) SignURL(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("partnerclient: %w", err)
	}
	params, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", fmt.Errorf("partnerclient: query of %q: %w", rawURL, err)
	}
	signed, err := s.Sign(params)
	if err != nil {
		return "", err
	}
	u.RawQuery = signed.Encode()
	return u.String(), nil
}

// Canonical returns the signed string without the secret: timestamp,
// nonce, then name + value of every parameter of params, names in
// ascending byte order. params must not hold the four signing parameters.
func Canonical(timestamp, nonce string, params url.Values) string {
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(timestamp)
	b.WriteString(nonce)
	for _, name := range names {
		for _, v := range params[name] {
			b.WriteString(name)
			b.WriteString(v)
		}
	}
	return b.String()
}

// Signature returns the lower-case hex signature of a request.
func Signature(t SignType, secret, timestamp, nonce string, params url.Values) (string, error) {
	c := Canonical(timestamp, nonce, params)
	switch {
	case t == "" || strings.EqualFold(string(t), string(MD5)):
		sum := md5.Sum([]byte(secret + c))
		return hex.EncodeToString(sum[:]), nil
	case strings.EqualFold(string(t), string(HMACSHA256)):
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(c))
		return hex.EncodeToString(m.Sum(nil)), nil
	}
	return "", fmt.Errorf("partnerclient: unknown sign type %q", t)
}
