package sender

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"time"

	"gatehouse/internal/outbound"
)

// DefaultReplyTimeout bounds, once the connection is open, the wait for
// the response headers and the reading of up to MaxStoredResponseBody of
// the body together: a receiver dripping its reply is cut there (a 2xx
// still counts as success).
const DefaultReplyTimeout = 5 * time.Second

// Config configures a Sender.
type Config struct {
	// AllowPrivate lets callbacks reach loopback, private and link-local
	// addresses.
	AllowPrivate bool
	// LoopbackApps are app keys whose callbacks may reach loopback
	// addresses (and no other private ones) even without AllowPrivate;
	// their attempts go through a client of their own.
	LoopbackApps []string
	// Outbound are the limits of the HTTP client; nil:
	// outbound.DefaultConfig. Its Dialer is always replaced.
	Outbound *outbound.Config
	// Proxy is the HTTP CONNECT proxy every attempt goes through (empty:
	// attempts connect directly). The URL guard still checks each target.
	Proxy string
	// Now is the clock of the breakers' open wait and of signatures.
	Now func() time.Time
	// OnBreaker is told of every change of an endpoint's breaker.
	OnBreaker func(client *outbound.Client, key, from, to string)
}

// Sender makes the HTTP attempts of deliveries: every attempt goes
// through the SSRF-guarded client, or the loopback one for LoopbackApps.
type Sender struct {
	cfg      Config
	http     *outbound.Client
	loopHTTP *outbound.Client // nil when there are no LoopbackApps
	loopback map[string]bool
}

// New returns a Sender for cfg.
func New(cfg Config) (*Sender, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sender{cfg: cfg, loopback: make(map[string]bool)}
	var proxy *url.URL
	var err error
	if cfg.Proxy != "" {
		if proxy, err = outbound.ParseProxyURL(cfg.Proxy); err != nil {
			return nil, fmt.Errorf("webhook: proxy URL %w", err)
		}
	}
	refuse := forbidden
	if cfg.AllowPrivate {
		refuse = nil
	}
	if s.http, err = s.newClient(dialVia(proxy, refuse)); err != nil {
		return nil, err
	}
	for _, k := range cfg.LoopbackApps {
		s.loopback[k] = true
	}
	if len(s.loopback) > 0 && !cfg.AllowPrivate {
		if s.loopHTTP, err = s.newClient(dialVia(proxy, forbiddenButLoopback)); err != nil {
			s.http.Close()
			return nil, err
		}
	}
	return s, nil
}

func dialer() *net.Dialer { return &net.Dialer{KeepAlive: 30 * time.Second, Resolver: Resolver} }

// Resolver looks up callback hosts: nil, the system's. Tests whose hosts
// must fail to resolve set one that never leaves the machine.
var Resolver *net.Resolver

// dialVia is how attempts connect: through proxy (nil: directly), never
// to an address refuse refuses (nil: none is).
func dialVia(proxy *url.URL, refuse func(netip.Addr) bool) outbound.DialFunc {
	switch {
	case proxy != nil && refuse == nil:
		return outbound.ProxyDialer(proxy, nil, dialer())
	case proxy != nil:
		return outbound.ProxyDialer(proxy, func(a netip.Addr) error {
			if refuse(a) {
				return fmt.Errorf("%w: %s", ErrForbiddenAddress, a)
			}
			return nil
		}, dialer())
	case refuse == nil:
		return dialer().DialContext
	}
	return guard(dialer(), refuse).DialContext
}

// ClientConfig is the outbound configuration of attempts: Config.Outbound
// (default: the outbound limits, connect 3 s), never retried by the
// client, with the reply bounded by DefaultReplyTimeout unless it says
// otherwise.
func (s *Sender) ClientConfig() outbound.Config {
	cfg := outbound.DefaultConfig()
	if s.cfg.Outbound != nil {
		cfg = *s.cfg.Outbound
	}
	// Webhooks are POSTs with their own retry schedule: the client never
	// repeats them (it would not anyway, POST is not idempotent).
	cfg.RetryAttempts, cfg.RetryWaits = 1, nil
	// The breaker judges a full window of 10 attempts (as for every
	// outbound call): a delivery on the default schedule (6 attempts)
	// never opens its endpoint's breaker by itself, so that schedule stays
	// 1, 2, 4, 8, 16 × base. A longer retry schedule (up to 20 attempts)
	// can: its later retries then wait for the half-open time, using no
	// attempt, as everyone's do.
	if cfg.ReplyTimeout == 0 {
		cfg.ReplyTimeout = DefaultReplyTimeout
	}
	return cfg
}

// newClient builds an HTTP client for attempts: the outbound limits and
// a breaker per callback endpoint, dialing with dial (an SSRF guard).
func (s *Sender) newClient(dial outbound.DialFunc) (*outbound.Client, error) {
	cfg := s.ClientConfig()
	cfg.Dialer = dial
	var hc *outbound.Client
	hc, err := outbound.New(cfg, outbound.WithClock(s.cfg.Now), outbound.WithStateListener(func(key, from, to string) {
		if s.cfg.OnBreaker != nil {
			s.cfg.OnBreaker(hc, key, from, to) // never before New returned: no call has been made
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return hc, nil
}

// Client is the HTTP client of app appKey's attempts (and breakers).
func (s *Sender) Client(appKey string) *outbound.Client {
	if s.loopHTTP != nil && s.loopback[appKey] {
		return s.loopHTTP
	}
	return s.http
}

// Clients are every client of the Sender, for their breakers' gauges.
func (s *Sender) Clients() []*outbound.Client {
	if s.loopHTTP != nil {
		return []*outbound.Client{s.http, s.loopHTTP}
	}
	return []*outbound.Client{s.http}
}

// CheckCallbackURL is the check a callback URL of app appKey must pass
// when it is registered: ValidateCallbackURL, with loopback allowed for
// LoopbackApps.
func (s *Sender) CheckCallbackURL(appKey, u string) error {
	if s.loopback[appKey] && !s.cfg.AllowPrivate {
		return ValidateLoopbackCallbackURL(u)
	}
	return ValidateCallbackURL(u, s.cfg.AllowPrivate)
}

// Close closes the Sender's clients.
func (s *Sender) Close() {
	for _, c := range s.Clients() {
		c.Close()
	}
}
