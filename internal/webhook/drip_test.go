package webhook_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/outbound"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// The bounds of one attempt by default: connect 3 s, then 5 s for the
// headers and up to 64 KiB of body together, 8 s in all. The tests below
// run the same code with the reply bound shortened.
func TestAttemptBoundsByDefault(t *testing.T) {
	if webhook.DefaultAttemptTimeout != 8*time.Second || webhook.DefaultReplyTimeout != 5*time.Second {
		t.Fatalf("attempt %s, reply %s; want 8 s and 5 s", webhook.DefaultAttemptTimeout, webhook.DefaultReplyTimeout)
	}
	e := newEnv(t, testenv.Backend{Name: "sqlite"}, webhook.Options{AllowPrivate: true})
	cfg := webhook.ClientConfig(e.svc)
	if cfg.ConnectTimeout != 3*time.Second || cfg.ReplyTimeout != 5*time.Second || webhook.AttemptTimeout(e.svc) != 8*time.Second {
		t.Fatalf("connect %s, reply %s, attempt %s", cfg.ConnectTimeout, cfg.ReplyTimeout, webhook.AttemptTimeout(e.svc))
	}
}

// dripper is a loopback receiver that reads the request and then sends
// its reply a piece at a time: the status line, then one header byte per
// tick (headers never complete), or whole headers and then one body byte
// per tick. It stops when the client hangs up.
type dripper struct {
	ln      net.Listener
	status  int
	headers bool // drip the headers; else the body
	prefix  int  // body bytes sent at once before the drip
	tick    time.Duration
	wg      sync.WaitGroup
}

func newDripper(t *testing.T, status int, dripHeaders bool, prefix int) *dripper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dripper{ln: ln, status: status, headers: dripHeaders, prefix: prefix, tick: 20 * time.Millisecond}
	d.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.wg.Go(func() { d.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); d.wg.Wait() })
	return d
}

func (d *dripper) url() string { return "http://" + d.ln.Addr().String() + "/hook" }

func (d *dripper) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\n", d.status, http.StatusText(d.status))
	drip := strings.Repeat("x", 1<<20)
	if d.headers {
		head += "X-Slow: "
	} else {
		head += "Content-Type: text/plain\r\nContent-Length: 10000000\r\n\r\n" + strings.Repeat("p", d.prefix)
	}
	if _, err := io.WriteString(c, head); err != nil {
		return
	}
	t := time.NewTicker(d.tick)
	defer t.Stop()
	for i := 0; i < len(drip); i++ {
		<-t.C
		if _, err := c.Write([]byte{drip[i]}); err != nil {
			return
		}
	}
}

// A receiver dripping its reply is cut at the reply bound: headers not
// complete by then fail the attempt; a body still arriving is cut, and
// a 2xx status counts as success with the body that came; a 5xx fails.
func TestDrippingReceiverIsCut(t *testing.T) {
	const reply = 400 * time.Millisecond
	oc := outbound.DefaultConfig()
	oc.ReplyTimeout = reply
	// Longer than the test: only the reply bound may end an attempt.
	oc.ReadTimeout = time.Minute
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, Outbound: &oc, AttemptTimeout: time.Minute, Lease: 2 * time.Minute, RetryBase: time.Hour})
		for _, c := range []struct {
			name        string
			status      int
			dripHeaders bool
			prefix      int
			want        webhookdelivery.Status
			check       func(t *testing.T, status *int, body, errText string)
		}{
			{"headers dripped", 200, true, 0, webhookdelivery.StatusRETRYING, func(t *testing.T, status *int, body, errText string) {
				if status != nil || !strings.Contains(errText, "read timeout") {
					t.Fatalf("status %v, error %q: want no status and a read timeout", status, errText)
				}
			}},
			{"2xx, body dripped", 200, false, 10, webhookdelivery.StatusSUCCESS, func(t *testing.T, status *int, body, errText string) {
				if status == nil || *status != 200 || errText != "" || !strings.HasPrefix(body, strings.Repeat("p", 10)+"x") || len(body) >= 64<<10 {
					t.Fatalf("status %v, error %q, body %q: want 200, no error, the bytes that came", status, errText, body)
				}
			}},
			{"2xx, 64 KiB then a drip", 202, false, 70 << 10, webhookdelivery.StatusSUCCESS, func(t *testing.T, status *int, body, errText string) {
				if status == nil || *status != 202 || errText != "" || len(body) != 64<<10 {
					t.Fatalf("status %v, error %q, body of %d bytes: want 202 and 64 KiB", status, errText, len(body))
				}
			}},
			{"5xx, body dripped", 503, false, 0, webhookdelivery.StatusRETRYING, func(t *testing.T, status *int, body, errText string) {
				if status == nil || *status != 503 {
					t.Fatalf("status %v, error %q: want 503", status, errText)
				}
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				rcv := newDripper(t, c.status, c.dripHeaders, c.prefix)
				appID, _ := e.newApp(t, rcv.url())
				start := time.Now()
				d := e.pay(t, appID)
				e.waitStatus(t, d.ID, c.want, 10*time.Second)
				took := time.Since(start)
				as := e.attempts(t, d.ID)
				if len(as) != 1 {
					t.Fatalf("%d attempts", len(as))
				}
				a := as[0]
				c.check(t, a.ResponseStatus, a.ResponseBody, a.Error)
				// Cut at the bound (64 KiB in full ends sooner): not before,
				// and not much after.
				if ms := time.Duration(a.DurationMs) * time.Millisecond; (c.prefix < 64<<10 && ms < reply-50*time.Millisecond) || ms > reply+2*time.Second || took > reply+5*time.Second {
					t.Fatalf("attempt took %s (delivery %s), bound %s", ms, took, reply)
				}
			})
		}
	})
}
