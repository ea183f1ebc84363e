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

// rawConn is one plain HTTP/1.1 connection of the load generator, used
// for one request at a time and dialled again when the server closes it.
// It sends requests built beforehand and parses no more of an answer than
// its status line, Content-Length and Connection headers and body: at
// 1.5 × a capacity of 20,000 requests per second on one core, net/http's
// client (or a goroutine and a URL parse per request) would be the
// bottleneck, not the server measured.
type rawConn struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
	body []byte // the last answer's body (reused)
}

// errTimeout is a request that got no whole answer within its timeout.
var errTimeout = errors.New("timeout")

// buildRequest is the bytes of GET u (an absolute http URL).
func buildRequest(u string) ([]byte, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	req := make([]byte, 0, 64+len(u))
	req = append(req, "GET "...)
	req = append(req, pu.RequestURI()...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, pu.Host...)
	req = append(req, "\r\nUser-Agent: gatehouse-bench\r\n\r\n"...)
	return req, nil
}

// dial opens the connection if it is not open; the dial must end by
// deadline.
func (c *rawConn) dial(deadline time.Time) error {
	if c.c != nil {
		return nil
	}
	nc, err := net.DialTimeout("tcp", c.addr, time.Until(deadline))
	if err != nil {
		return timeoutOr(err)
	}
	c.c = nc
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, 4096)
	} else {
		c.br.Reset(nc)
	}
	return nil
}

func (c *rawConn) close() {
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

func timeoutOr(err error) error {
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return errTimeout
	}
	return err
}

// do sends req and reads the answer's status and body (in c.body, valid
// until the next call); the whole exchange, a dial included, must end by
// deadline. On an error the connection is closed (the next call dials).
func (c *rawConn) do(req []byte, deadline time.Time) (int, error) {
	if err := c.dial(deadline); err != nil {
		return 0, err
	}
	status, keep, err := c.roundTrip(req, deadline)
	if err != nil || !keep {
		c.close()
	}
	if err != nil {
		return 0, timeoutOr(err)
	}
	return status, nil
}

func (c *rawConn) roundTrip(req []byte, deadline time.Time) (status int, keep bool, err error) {
	if err := c.c.SetDeadline(deadline); err != nil {
		return 0, false, err
	}
	if _, err := c.c.Write(req); err != nil {
		return 0, false, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	keep = true
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
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
			return 0, false, errors.New("chunked answers are not read by the raw client")
		}
	}
	if length < 0 {
		c.body = c.body[:0]
		for {
			b, err := c.br.ReadByte()
			if err != nil {
				return status, false, nil // the body ends with the connection
			}
			c.body = append(c.body, b)
		}
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		return 0, false, err
	}
	return status, keep, nil
}
