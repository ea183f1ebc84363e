package sender

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"gatehouse/internal/redact"
)

// Errors of callback address checks, for errors.Is.
var (
	// ErrForbiddenAddress means the address is loopback, private,
	// link-local or otherwise internal, and private addresses are not allowed.
	ErrForbiddenAddress = errors.New("webhook: forbidden callback address")
	// ErrInvalidURL means the callback URL is malformed or not http(s).
	ErrInvalidURL = errors.New("webhook: invalid callback URL")
)

// MaxURLLength is the longest callback URL accepted.
const MaxURLLength = 2048

// forbiddenPrefixes are the networks a callback may not reach. IPv4-mapped
// IPv6 addresses are unmapped before the check, so they are covered too.
var forbiddenPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",      // "this network", incl. the unspecified 0.0.0.0
		"10.0.0.0/8",     // private
		"100.64.0.0/10",  // carrier-grade NAT
		"127.0.0.0/8",    // loopback
		"169.254.0.0/16", // link-local, incl. cloud metadata 169.254.169.254
		"172.16.0.0/12",  // private
		"192.0.0.0/24",   // IETF protocol assignments (e.g. NAT64 discovery)
		"192.168.0.0/16", // private
		"198.18.0.0/15",  // benchmarking, used inside some data centres
		"224.0.0.0/4",    // multicast
		"240.0.0.0/4",    // reserved, incl. broadcast 255.255.255.255
		"::/96",          // unspecified, loopback ::1 and deprecated IPv4-compatible forms
		"64:ff9b:1::/48", // NAT64 for local use
		"2001::/32",      // Teredo: tunnels to an obfuscated IPv4 address
		"fc00::/7",       // unique local (private)
		"fe80::/10",      // link-local
		"fec0::/10",      // deprecated site-local
		"ff00::/8",       // multicast
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64: IPv4 in the last 4 bytes
	sixToFour = netip.MustParsePrefix("2002::/16")    // 6to4: IPv4 in bytes 2-5
)

// forbidden reports whether a callback may not connect to a.
func forbidden(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if !a.IsValid() {
		return true
	}
	for _, p := range forbiddenPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	// Translators forward these to the IPv4 address they embed.
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return forbidden(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return forbidden(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return false
}

// GuardedDialer returns a copy of base (nil: a zero net.Dialer) that refuses
// to connect to forbidden addresses unless allowPrivate. The check runs on
// the address actually being connected to, after name resolution, so a
// name that resolves differently at delivery time (DNS rebinding) cannot
// slip through. Errors wrap ErrForbiddenAddress. Any Control or
// ControlContext of base still runs after the check.
//
// Use it without an HTTP proxy: through a proxy the dialer would only see
// the proxy's address.
func GuardedDialer(allowPrivate bool, base *net.Dialer) *net.Dialer {
	if allowPrivate {
		d := &net.Dialer{}
		if base != nil {
			*d = *base
		}
		return d
	}
	return guard(base, forbidden)
}

// LoopbackDialer is GuardedDialer that also lets loopback addresses
// through (and nothing else that is forbidden): for the demo app of
// `serve --demo`, whose receiver runs on the same machine.
func LoopbackDialer(base *net.Dialer) *net.Dialer { return guard(base, forbiddenButLoopback) }

func forbiddenButLoopback(a netip.Addr) bool {
	return forbidden(a) && !a.WithZone("").Unmap().IsLoopback()
}

// guard returns a copy of base that refuses to connect where refuse says.
func guard(base *net.Dialer, refuse func(netip.Addr) bool) *net.Dialer {
	d := &net.Dialer{}
	if base != nil {
		*d = *base
	}
	next, nextPlain := d.ControlContext, d.Control
	d.Control = nil
	d.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			// Fail closed: Control always sees a numeric address.
			return fmt.Errorf("%w: cannot parse %q: %w", ErrForbiddenAddress, address, err)
		}
		if refuse(ap.Addr()) {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, ap.Addr())
		}
		switch {
		case next != nil:
			return next(ctx, network, address, c)
		case nextPlain != nil:
			return nextPlain(network, address, c)
		}
		return nil
	}
	return d
}

// ValidateCallbackURL checks a callback URL when it is registered: http or
// https, a host, no user information, at most MaxURLLength bytes, and,
// unless allowPrivate, no IP literal or localhost name that is forbidden.
// Host names are checked again at every delivery by GuardedDialer, since
// their addresses can change.
//
// Numeric hosts other than dotted-decimal IPv4 (2130706433, 0x7f000001,
// 0177.0.0.1, 127.1) are refused as invalid: resolvers disagree on them.
// They additionally wrap ErrForbiddenAddress when they denote a forbidden
// address.
func ValidateCallbackURL(raw string, allowPrivate bool) error {
	refuse := forbidden
	if allowPrivate {
		refuse = func(netip.Addr) bool { return false }
	}
	return validateCallbackURL(raw, refuse)
}

// ValidateLoopbackCallbackURL is ValidateCallbackURL for the demo app:
// loopback addresses and localhost names are accepted, other private ones
// are not.
func ValidateLoopbackCallbackURL(raw string) error {
	return validateCallbackURL(raw, forbiddenButLoopback)
}

func validateCallbackURL(raw string, refuse func(netip.Addr) bool) error {
	if len(raw) > MaxURLLength {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidURL, MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// net/url's error quotes the whole URL: it goes back to the
		// caller and may be logged, so only its scheme and host.
		return fmt.Errorf("%w: %s", ErrInvalidURL, redact.Text(err.Error(), raw))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: scheme must be http or https", ErrInvalidURL)
	case u.Opaque != "":
		return fmt.Errorf("%w: not a hierarchical URL", ErrInvalidURL)
	case u.User != nil:
		return fmt.Errorf("%w: user information is not allowed", ErrInvalidURL)
	case u.Hostname() == "":
		return fmt.Errorf("%w: host is missing", ErrInvalidURL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: bad port %q", ErrInvalidURL, p)
		}
	}

	host := strings.TrimSuffix(u.Hostname(), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("%w: IPv6 zones are not allowed", ErrInvalidURL)
		}
		if refuse(a) {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, a)
		}
		return nil
	}
	if numericHost(host) {
		a, ok := parseLegacyIPv4(host)
		if ok && forbidden(a) {
			return fmt.Errorf("%w: %w: %q is %s", ErrInvalidURL, ErrForbiddenAddress, host, a)
		}
		return fmt.Errorf("%w: write IPv4 addresses in dotted-decimal form, not %q", ErrInvalidURL, host)
	}
	if lower := strings.ToLower(host); refuse(netip.IPv6Loopback()) && (lower == "localhost" || strings.HasSuffix(lower, ".localhost")) {
		// RFC 6761: these names always resolve to loopback.
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, host)
	}
	return nil
}

// numericHost reports whether host's last label is a number, which no DNS
// name has (RFC 3696 section 2): such a host is meant as an IPv4 address.
func numericHost(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if len(last) > 2 && (last[:2] == "0x" || last[:2] == "0X") {
		last = last[2:]
		return last != "" && strings.Trim(last, "0123456789abcdefABCDEF") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// parseLegacyIPv4 reads the forms inet_aton accepts: one to four parts in
// decimal, octal (leading 0) or hex (0x), the last part filling the
// remaining bytes (127.1 = 127.0.0.1, 2130706433 = 127.0.0.1).
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, p = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v |= n << (8 * (3 - i))
			continue
		}
		if bits := 8 * (4 - i); n >= 1<<bits {
			return netip.Addr{}, false
		}
		v |= n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}
