package e2e_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

// TestDeductionOutcomeUnknown: gatehouse reaches Postgres through a TCP
// relay that, once armed with a biz_no, passes the deduction's statement
// on and then drops the connection as the reply comes back: the database
// committed it, gatehouse cannot know. The answer says so — 503/6000
// "outcome unknown: repeat the call with the same biz_no", not "nothing
// changed" — and the repeat replays the stored outcome (200, the same
// data, Idempotent-Replayed) without deducting twice.
func TestDeductionOutcomeUnknown(t *testing.T) {
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	relay := startReplyDropper(t, u.Host)
	u.Host = relay.addr
	f := setup(t, testenv.Backend{Name: "postgres", DatabaseURL: u.String()})
	deduct := func(biz string) resp {
		return send(t, f.Client, newRequest(t, "POST", f.signed(t, f.app.AppKey, f.secret, "/api/v1/inventory/deduct",
			url.Values{"biz_no": {biz}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}}), ""))
	}
	stock := func() int64 {
		s, err := f.App.Inventory.Sku(context.Background(), f.skuID)
		if err != nil {
			t.Fatal(err)
		}
		return s.Stock
	}
	if r := deduct("KNOWN-1"); r.status != 200 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	before := stock()

	relay.arm("LOST-REPLY-1")
	r := deduct("LOST-REPLY-1")
	m := r.object(t)
	if r.status != 503 || m["code"] != float64(6000) || !strings.Contains(m["message"].(string), "outcome unknown: repeat the call with the same biz_no") {
		t.Fatalf("deduction whose reply was lost after the commit: %d %s, want 503/6000 outcome unknown", r.status, r.body)
	}
	if !relay.dropped.Load() {
		t.Fatal("the relay never dropped a reply: the test did not test anything")
	}
	if got := stock(); got != before-1 {
		t.Fatalf("stock %d after the lost reply, want %d (the statement committed)", got, before-1)
	}
	r = deduct("LOST-REPLY-1")
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" || !bytes.Contains(r.body, []byte("LOST-REPLY-1")) {
		t.Fatalf("repeat after outcome unknown: %d %v %s, want the stored success replayed", r.status, r.header, r.body)
	}
	if got := stock(); got != before-1 {
		t.Fatalf("stock %d after the repeat, want %d (deducted once)", got, before-1)
	}
}

// replyDropper is a TCP relay to a Postgres server. Armed with a marker,
// the first connection whose client sends it has the server's next reply
// withheld and is then closed on both sides (once: it disarms itself).
type replyDropper struct {
	addr    string
	marker  atomic.Pointer[[]byte]
	dropped atomic.Bool
}

func startReplyDropper(t *testing.T, upstream string) *replyDropper {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &replyDropper{addr: l.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { d.relay(c, upstream) })
		}
	})
	return d
}

func (d *replyDropper) arm(marker string) {
	b := []byte(marker)
	d.marker.Store(&b)
}

func (d *replyDropper) relay(client net.Conn, upstream string) {
	defer client.Close()
	server, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer server.Close()
	var doomed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if m := d.marker.Load(); m != nil && bytes.Contains(buf[:n], *m) && d.marker.CompareAndSwap(m, nil) {
					doomed.Store(true)
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && doomed.Load() {
			// The reply of the marked statement: the server has run it
			// (an autocommit statement's reply is flushed with its
			// ReadyForQuery, after the commit). Drop it and the line.
			time.Sleep(50 * time.Millisecond)
			d.dropped.Store(true)
			client.Close()
			server.Close()
			break
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	<-done
	_, _ = io.Copy(io.Discard, server)
}
