package kv

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Topology is the shape of the Redis deployment a URL names.
type Topology string

// The Redis topologies [Open] accepts.
const (
	// Single is one Redis server (redis:// or rediss://).
	Single Topology = "single"
	// Cluster is a Redis Cluster (redis+cluster:// or rediss+cluster://).
	Cluster Topology = "cluster"
	// Sentinel is a master found through Redis Sentinel
	// (redis+sentinel:// or rediss+sentinel://).
	Sentinel Topology = "sentinel"
)

// RedisSchemes are the URL schemes [Open] accepts, for error messages and
// configuration checks.
var RedisSchemes = []string{"redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"}

// IsRedisURL reports whether raw starts with one of [RedisSchemes].
func IsRedisURL(raw string) bool {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return false
	}
	for _, s := range RedisSchemes {
		if scheme == s {
			return true
		}
	}
	return false
}

// redisURL is a Redis URL split into what go-redis's own parsers need.
//
// The cluster and Sentinel forms list several hosts in the authority,
// comma-separated, which net/url cannot parse; they are rewritten into
// the forms go-redis's ParseClusterURL and ParseFailoverURL document
// (one host, the others as addr= parameters), so every option those
// parsers know (dial_timeout, pool_size, …) works in the query as it does
// for redis:// URLs.
type redisURL struct {
	topology Topology
	tls      bool
	userinfo string   // as written, still escaped
	hosts    []string // host:port
	path     string   // without the leading slash
	query    url.Values
}

func splitRedisURL(raw string) (redisURL, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return redisURL{}, errors.New("missing scheme")
	}
	var u redisURL
	switch scheme {
	case "redis", "rediss":
		u.topology = Single
	case "redis+cluster", "rediss+cluster":
		u.topology = Cluster
	case "redis+sentinel", "rediss+sentinel":
		u.topology = Sentinel
	default:
		return redisURL{}, fmt.Errorf("unsupported scheme %q (want one of %s)", scheme, strings.Join(RedisSchemes, ", "))
	}
	u.tls = strings.HasPrefix(scheme, "rediss")
	rest, rawQuery, _ := strings.Cut(rest, "?")
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	authority, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		u.userinfo, authority = authority[:i], authority[i+1:]
	}
	for _, h := range strings.Split(authority, ",") {
		if h = strings.TrimSpace(h); h != "" {
			u.hosts = append(u.hosts, h)
		}
	}
	if len(u.hosts) == 0 {
		return redisURL{}, errors.New("no host")
	}
	if u.topology == Single && len(u.hosts) > 1 {
		return redisURL{}, errors.New("several hosts in a single-node URL: use redis+cluster:// or redis+sentinel://")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return redisURL{}, fmt.Errorf("query: %w", err)
	}
	u.path, u.query = path, q
	return u, nil
}

// libraryURL is u in go-redis's own one-host form: scheme redis or rediss,
// the first host, the other hosts as addr= parameters.
func (u redisURL) libraryURL(userinfo string, q url.Values) string {
	scheme := "redis"
	if u.tls {
		scheme = "rediss"
	}
	q = cloneValues(q)
	for _, h := range u.hosts[1:] {
		q.Add("addr", h)
	}
	s := scheme + "://"
	if userinfo != "" {
		s += userinfo + "@"
	}
	s += u.hosts[0]
	if u.path != "" {
		s += "/" + u.path
	}
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

func cloneValues(q url.Values) url.Values {
	c := make(url.Values, len(q))
	for k, v := range q {
		c[k] = append([]string(nil), v...)
	}
	return c
}

// newRedisClient builds the go-redis client for raw: a Client for one
// server, a ClusterClient for a cluster, a failover Client (a Client whose
// address follows Sentinel) for Sentinel. Settings the URL does not give
// fail fast (see redis.go). rootCAs, when not nil, replaces the system
// roots for TLS.
func newRedisClient(raw string, rootCAs *x509.CertPool) (redis.UniversalClient, Topology, error) {
	u, err := splitRedisURL(raw)
	if err != nil {
		return nil, "", err
	}
	withCA := func(c *tls.Config) {
		if c != nil && rootCAs != nil {
			c.RootCAs = rootCAs
		}
	}
	switch u.topology {
	case Cluster:
		if u.path != "" {
			return nil, "", errors.New("a cluster has no database number: remove the path")
		}
		opt, err := redis.ParseClusterURL(u.libraryURL(u.userinfo, u.query))
		if err != nil {
			return nil, "", err
		}
		withCA(opt.TLSConfig)
		opt.DialTimeout = orDefault(opt.DialTimeout, dialTimeout)
		opt.ReadTimeout = orDefault(opt.ReadTimeout, ioTimeout)
		opt.WriteTimeout = orDefault(opt.WriteTimeout, ioTimeout)
		opt.PoolTimeout = orDefault(opt.PoolTimeout, poolTimeout)
		opt.PoolSize = orDefault(opt.PoolSize, poolSize)
		opt.DialerRetries = orDefault(opt.DialerRetries, 1)
		opt.MaxRetries = orDefault(opt.MaxRetries, -1)
		opt.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opt), Cluster, nil
	case Sentinel:
		// Path: /master-name[/db]. The URL's user and password are the data
		// nodes'; Sentinel's own are the sentinel_username and
		// sentinel_password parameters (go-redis reads them the other way
		// round, from the user info).
		name, db, _ := strings.Cut(u.path, "/")
		if name == "" {
			return nil, "", errors.New("a Sentinel URL names its master: redis+sentinel://host:port,host:port/master-name")
		}
		q := cloneValues(u.query)
		q.Set("master_name", name)
		if db != "" {
			q.Set("db", db)
		}
		if u.userinfo != "" {
			info, err := url.Parse("redis://" + u.userinfo + "@h")
			if err != nil {
				return nil, "", errors.New("malformed user information")
			}
			if user := info.User.Username(); user != "" {
				q.Set("username", user)
			}
			if pw, ok := info.User.Password(); ok {
				q.Set("password", pw)
			}
		}
		sentinelInfo := ""
		if su, sp := q.Get("sentinel_username"), q.Get("sentinel_password"); su != "" || sp != "" {
			sentinelInfo = url.UserPassword(su, sp).String()
			q.Del("sentinel_username")
			q.Del("sentinel_password")
		}
		lib := u
		lib.path = ""
		opt, err := redis.ParseFailoverURL(lib.libraryURL(sentinelInfo, q))
		if err != nil {
			return nil, "", err
		}
		withCA(opt.TLSConfig)
		opt.DialTimeout = orDefault(opt.DialTimeout, dialTimeout)
		opt.ReadTimeout = orDefault(opt.ReadTimeout, ioTimeout)
		opt.WriteTimeout = orDefault(opt.WriteTimeout, ioTimeout)
		opt.PoolTimeout = orDefault(opt.PoolTimeout, poolTimeout)
		opt.PoolSize = orDefault(opt.PoolSize, poolSize)
		opt.DialerRetries = orDefault(opt.DialerRetries, 1)
		opt.MaxRetries = orDefault(opt.MaxRetries, -1)
		opt.ContextTimeoutEnabled = true
		return redis.NewFailoverClient(opt), Sentinel, nil
	default:
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return nil, "", err
		}
		withCA(opt.TLSConfig)
		opt.DialTimeout = orDefault(opt.DialTimeout, dialTimeout)
		opt.ReadTimeout = orDefault(opt.ReadTimeout, ioTimeout)
		opt.WriteTimeout = orDefault(opt.WriteTimeout, ioTimeout)
		opt.PoolTimeout = orDefault(opt.PoolTimeout, poolTimeout)
		// go-redis sizes the pool 10 per CPU (20 on two cores); more
		// concurrent requests than that queue for a connection. Sized like
		// the Postgres pool, every request in flight has one.
		opt.PoolSize = orDefault(opt.PoolSize, poolSize)
		// go-redis dials up to 5 times with backoff by default, which would
		// stretch "Redis is down" to several seconds per call.
		opt.DialerRetries = orDefault(opt.DialerRetries, 1)
		// No command retries: a retried Admit whose first attempt did run
		// (reply lost to a timeout) would call its own nonce a duplicate.
		// Callers get errs.Unavailable at once and decide.
		opt.MaxRetries = orDefault(opt.MaxRetries, -1)
		opt.ContextTimeoutEnabled = true
		return redis.NewClient(opt), Single, nil
	}
}

// orDefault is v, or def when the URL left v at its zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// safeURLError strips what could echo a password from a URL parse error:
// url.Parse quotes the whole URL.
func safeURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
