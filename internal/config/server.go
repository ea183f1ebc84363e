package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Server is the listeners and what bounds the work behind them.
type Server struct {
	Addr      string `flag:"addr" default:"127.0.0.1:8080" usage:"public listener" doc:"public listener: tickets, partner REST, OAuth, login"`
	AdminAddr string `flag:"admin-addr" default:"127.0.0.1:8081" usage:"admin listener (GraphQL, Playground, /metrics)" doc:"admin listener: GraphQL, Playground, /metrics"`
	// TrustedProxiesRaw is read into Config.TrustedProxies by Resolve.
	PublicURL         string        `flag:"public-url" usage:"the URL clients reach the public listener at, e.g. https://gatehouse.example.com (OAuth issuer)" doc:"the URL clients reach the public listener at, e.g. https://gatehouse.example.com: the OAuth issuer and the base of the endpoints in /.well-known/oauth-authorization-server; empty: each request's own (Host, and https when it came over TLS or a trusted proxy says so)"`
	TrustedProxiesRaw string        `flag:"trusted-proxies" usage:"comma-separated CIDRs of reverse proxies whose X-Forwarded-For/-Proto are believed" doc:"comma-separated CIDRs of reverse proxies: only from them are X-Forwarded-For (client address for throttling and logs) and X-Forwarded-Proto (HTTPS, Secure cookies, HSTS) believed"`
	RequestTimeout    time.Duration `flag:"request-timeout" default:"10s" usage:"deadline of each request's database and Redis work (then 503)" doc:"deadline of every request's database and Redis work; past it (or when the client hangs up) the work is cancelled, transactions roll back, and the reply is 503"`
	// ShutdownDrainRaw is read into Config.ShutdownDrain by Resolve: its
	// default depends on the database.
	// ReadyRequires names dependencies /readyz fails without (ReadyRequired).
	ReadyRequires    string `flag:"ready-requires" usage:"comma-separated dependencies (database, kv) whose failure makes /readyz answer 503; default none: /readyz reports them and stays 200" doc:"comma-separated dependencies (database, kv) whose failure (any state but ok) makes /readyz answer 503, taking the replica out of its load balancer; empty: /readyz answers 503 only while the replica starts or drains, and reports the dependencies' states in its body (a shared dependency failing must not empty the balancer: routes that do not need it keep serving; see [readiness](deploy.md#readiness))"`
	ShutdownDrainRaw string `flag:"shutdown-drain" empty:"5s with Postgres, 0s embedded" usage:"after SIGTERM, answer /readyz with 503 this long before closing the listeners (default 5s with Postgres, 0s embedded)" doc:"after SIGTERM, answer /readyz with 503 this long (≤ 1m) while still serving, then close the listeners, so load balancers stop routing first ([rolling restarts](deploy.md#rolling-restarts-the-drain)); the embedded default is 0s since one process holds the SQLite file and cannot be replaced without a gap anyway"`
}

// DefaultShutdownDrain is the drain with Postgres when none is set: more
// than a balancer checking /readyz every second needs to see two failures.
const DefaultShutdownDrain = 5 * time.Second

// shutdownDrain is the drain set, or the default for the database
// (DefaultShutdownDrain with Postgres, none embedded).
func (s *Server) shutdownDrain(postgres bool) (time.Duration, error) {
	if s.ShutdownDrainRaw == "" {
		if postgres {
			return DefaultShutdownDrain, nil
		}
		return 0, nil
	}
	d, err := time.ParseDuration(s.ShutdownDrainRaw)
	if err != nil || d < 0 || d > time.Minute {
		return 0, invalidf(s, &s.ShutdownDrainRaw, "must be a duration between 0s and 1m")
	}
	return d, nil
}

// Validate checks the addresses, proxies and durations.
func (s *Server) Validate() error {
	var errs []error
	for _, addr := range []*string{&s.Addr, &s.AdminAddr} {
		if _, _, err := net.SplitHostPort(*addr); err != nil {
			errs = append(errs, invalidf(s, addr, "%q is not host:port", *addr))
		}
	}
	if _, err := ParseTrustedProxies(s.TrustedProxiesRaw); err != nil {
		errs = append(errs, invalidf(s, &s.TrustedProxiesRaw, "%w", err))
	}
	if s.PublicURL != "" {
		u, err := url.Parse(s.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Trim(u.Path, "/") != "" {
			errs = append(errs, invalidf(s, &s.PublicURL, "%q must be an http(s) URL with a host and nothing after it, e.g. https://gatehouse.example.com", s.PublicURL))
		}
	}
	if s.RequestTimeout <= 0 || s.RequestTimeout > 10*time.Minute {
		errs = append(errs, invalidf(s, &s.RequestTimeout, "must be positive and at most 10m"))
	}
	if _, err := s.shutdownDrain(false); err != nil {
		errs = append(errs, err)
	}
	if _, err := s.ReadyRequired(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParseTrustedProxies reads a comma-separated list of CIDRs or single
// addresses ("10.0.0.0/8, 127.0.0.1"); empty entries are ignored.
func ParseTrustedProxies(raw string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, f := range strings.Split(raw, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q is neither a CIDR nor an IP address", f))
			continue
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, errors.Join(errs...)
}

// ReadyRequired is the set of dependencies (database, kv) named by
// GATEHOUSE_READY_REQUIRES.
func (s *Server) ReadyRequired() (map[string]bool, error) {
	out := map[string]bool{}
	for _, f := range strings.Split(s.ReadyRequires, ",") {
		switch f = strings.TrimSpace(f); f {
		case "":
		case "database", "kv":
			out[f] = true
		default:
			return nil, invalidf(s, &s.ReadyRequires, "%q is not a dependency: name database, kv or both", f)
		}
	}
	return out, nil
}
