package outbound

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"
)

// ParseProxyURL reads the URL of an HTTP CONNECT proxy (such as
// GATEHOUSE_WEBHOOK_PROXY): http://host:port (or
// https://, TLS to the proxy itself), optionally with user:password for
// the proxy's Basic authentication; no path, query or fragment. Errors
// never show the URL (it may hold the proxy's password).
func ParseProxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("must be a URL such as http://proxy.internal:4750")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an http:// or https:// URL of an HTTP CONNECT proxy")
	case u.Hostname() == "":
		return nil, errors.New("has no host")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return nil, errors.New("must be the proxy's address only (no path, query or fragment)")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, errors.New("has a bad port")
		}
	}
	return u, nil
}

// proxyAddr is the host:port to dial for proxy u (the scheme's port when
// none is given).
func proxyAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// ProxyDialer returns a dialer that opens every connection as a tunnel
// through the HTTP CONNECT proxy u (dialed with base; the operator chose
// it, so it may be on loopback or a private network).
//
// A guard on the target still applies: its name is resolved here, each
// address is passed to check (nil: none is refused; an error refuses it,
// and is the dial's error when every address was refused), and the tunnel
// is asked for the checked address itself (CONNECT 203.0.113.7:443), not
// the name, so the proxy cannot resolve the name differently and reach
// an address that was refused (DNS rebinding). TLS to the host runs
// inside the tunnel, end to end, with the URL's host name for SNI and
// verification. A refused target never reaches the proxy.
func ProxyDialer(u *url.URL, check func(netip.Addr) error, base *net.Dialer) DialFunc {
	addr := proxyAddr(u)
	var auth string
	if u.User != nil {
		pw, _ := u.User.Password()
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))
	}
	return func(ctx context.Context, network, target string) (net.Conn, error) {
		host, portText, err := net.SplitHostPort(target)
		if err != nil {
			return nil, err
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port in %q", target)
		}
		addrs, err := resolve(ctx, host)
		if err != nil {
			return nil, err
		}
		var lastErr error
		for _, a := range addrs {
			if check != nil {
				if err := check(a); err != nil {
					lastErr = err
					continue
				}
			}
			conn, err := connect(ctx, base, u, addr, auth, netip.AddrPortFrom(a, uint16(port)).String())
			if err == nil {
				return conn, nil
			}
			lastErr = err
			if ctx.Err() != nil {
				break
			}
		}
		return nil, lastErr
	}
}

// resolve returns the addresses of host (an IP literal is itself).
func resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	return addrs, nil
}

// connect dials the proxy at addr and asks it for a tunnel to target.
func connect(ctx context.Context, base *net.Dialer, u *url.URL, addr, auth, target string) (net.Conn, error) {
	conn, err := base.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("outbound proxy: %w", err)
	}
	if u.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("outbound proxy: TLS: %w", err)
		}
		conn = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// The dial's context ends the exchange too (a deadline alone would
	// not notice a cancellation).
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: target},
		Host:   target,
		Header: http.Header{},
	}
	if auth != "" {
		req.Header.Set("Proxy-Authorization", auth)
	}
	br := bufio.NewReader(conn)
	err = req.Write(conn)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if !stop() || err != nil {
		_ = conn.Close()
		if err == nil {
			err = context.Cause(ctx)
		}
		return nil, fmt.Errorf("outbound proxy: CONNECT %s: %w", target, err)
	}
	// The body is not read nor closed: after a 200 the connection is the
	// tunnel (a body of unknown length would read it until it closes).
	if resp.StatusCode != http.StatusOK {
		_ = conn.Close()
		return nil, fmt.Errorf("outbound proxy: CONNECT %s refused: %s", target, resp.Status)
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn reads what the proxy sent after its answer first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
