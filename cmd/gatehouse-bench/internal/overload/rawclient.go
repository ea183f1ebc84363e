package overload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// rawClient sends GETs over plain HTTP/1.1 connections it keeps itself,
// one request at a time on each, opening a new one whenever none is idle
// (an open-loop client never waits for a connection). It parses no more
// of an answer than its status and body: at 1.5 × a capacity of 20,000
// requests per second on one core, net/http's client would be the
// bottleneck, not the server measured.
type rawClient struct {
	addr string
	idle chan *rawConn
}

type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func newRawClient(addr string) *rawClient {
	return &rawClient{addr: addr, idle: make(chan *rawConn, 20000)}
}

// errTimeout is a request that got no whole answer within its timeout.
var errTimeout = errors.New("timeout")

// get sends GET u (absolute URL) and returns the status and body; the
// whole exchange must end by deadline.
func (rc *rawClient) get(u *url.URL, deadline time.Time) (int, []byte, error) {
	var c *rawConn
	select {
	case c = <-rc.idle:
	default:
		nc, err := net.DialTimeout("tcp", rc.addr, time.Until(deadline))
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return 0, nil, errTimeout
			}
			return 0, nil, err
		}
		c = &rawConn{c: nc, br: bufio.NewReaderSize(nc, 4096)}
	}
	status, body, keep, err := c.roundTrip(u, deadline)
	if err != nil {
		c.c.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return 0, nil, errTimeout
		}
		return 0, nil, err
	}
	if keep {
		select {
		case rc.idle <- c:
		default:
			c.c.Close()
		}
	} else {
		c.c.Close()
	}
	return status, body, nil
}

func (c *rawConn) roundTrip(u *url.URL, deadline time.Time) (status int, body []byte, keep bool, err error) {
	if err := c.c.SetDeadline(deadline); err != nil {
		return 0, nil, false, err
	}
	req := make([]byte, 0, 512)
	req = append(req, "GET "...)
	req = append(req, u.RequestURI()...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, u.Host...)
	req = append(req, "\r\nUser-Agent: gatehouse-bench\r\n\r\n"...)
	if _, err := c.c.Write(req); err != nil {
		return 0, nil, false, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	length, keep := -1, true
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		k, v, _ := bytes.Cut(h, []byte(":"))
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			length, _ = strconv.Atoi(string(v))
		case bytes.EqualFold(k, []byte("Connection")) && bytes.EqualFold(v, []byte("close")):
			keep = false
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			return 0, nil, false, errors.New("chunked answers are not read by the raw client")
		}
	}
	if length < 0 {
		body, err = io.ReadAll(c.br)
		return status, body, false, err
	}
	body = make([]byte, length)
	if _, err := io.ReadFull(c.br, body); err != nil {
		return 0, nil, false, err
	}
	return status, body, keep, nil
}
