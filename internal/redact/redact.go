// Package redact cuts URLs down to what logs, error fields and spans may
// show of them: the scheme and the host. A URL's user information, path,
// query and fragment often carry credentials of their own (a partner's
// callback token, a provider's key), and anything that reaches a log,
// WebhookDelivery.lastError (readable by READ_ONLY keys) or an exported
// span is out of gatehouse's hands.
//
// It works on the text, not on net/url's parse: a host net/url refuses
// (a percent-encoded dot) or re-encodes (a non-ASCII host such as
// "partner。example" comes back as "partner%E3%80%82example", an IPv6
// zone's "%" as "%25") is cut at the same place, and every form of a URL
// in an error text is found, whichever way the library that wrote it
// encoded it. Every place that may show a URL goes through here.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Unknown stands for a URL with no recognisable scheme and host.
const Unknown = "(URL)"

// URL returns scheme://host[:port] of raw, lower-casing the scheme: no
// user information, path, query or fragment. Without "scheme://" it
// returns Unknown.
func URL(raw string) string {
	scheme, host, ok := split(raw)
	if !ok {
		return Unknown
	}
	return scheme + "://" + host
}

// Host returns the host[:port] of raw (IPv6 literals in brackets, zones
// kept), "" when raw has none.
func Host(raw string) string {
	_, host, _ := split(raw)
	return host
}

// maxHost bounds the host shown: a host name is at most 253 bytes, an
// IPv6 literal with a zone and a port a little more.
const maxHost = 300

func split(raw string) (scheme, host string, ok bool) {
	raw = strings.TrimSpace(raw)
	i := strings.Index(raw, "://")
	if i <= 0 || !validScheme(raw[:i]) {
		return "", "", false
	}
	rest := raw[i+3:]
	// The authority ends at the path, query or fragment; a backslash
	// ends it too (browsers and some clients read it as a slash).
	if j := strings.IndexAny(rest, "/?#\\"); j >= 0 {
		rest = rest[:j]
	}
	// User information ends at the last "@" of the authority.
	if j := strings.LastIndex(rest, "@"); j >= 0 {
		rest = rest[j+1:]
	}
	if len(rest) > maxHost {
		rest = rest[:maxHost] + "…"
	}
	return strings.ToLower(raw[:i]), rest, true
}

func validScheme(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

// inText finds URLs in a text: a scheme, "://", and everything up to
// white space or a quote.
var inText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>` + "`" + `]*`)

// Text returns msg with every URL in it cut to its scheme and host (see
// URL), and with each of raws — the URLs the caller knows may be in msg —
// replaced in every form a library may have written it in (as given, as
// net/url re-encodes it, with its password masked), even without its
// scheme.
func Text(msg string, raws ...string) string {
	for _, raw := range raws {
		short := URL(raw)
		forms := []string{raw}
		if u, err := url.Parse(raw); err == nil {
			forms = append(forms, u.String(), u.Redacted())
		}
		for _, f := range forms {
			if _, rest, ok := strings.Cut(f, "://"); ok && rest != Host(raw) {
				forms = append(forms, rest)
			}
		}
		// Longest first: a shorter form may be part of a longer one.
		slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
		for _, f := range forms {
			if f != "" && f != short {
				msg = strings.ReplaceAll(msg, f, short)
			}
		}
	}
	return inText.ReplaceAllStringFunc(msg, URL)
}

// Error cuts the URL of the *url.Error in err's chain (net/http's errors
// name the request's whole URL) to its scheme and host, in place, and
// returns err. Call it on the error as the client returned it: an error
// that wraps it with fmt.Errorf has its text already written. Errors of
// other types are returned as they are; texts built from them go through
// Text.
func Error(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = URL(ue.URL)
	}
	return err
}
