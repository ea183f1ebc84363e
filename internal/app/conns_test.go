package app_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"gatehouse/internal/config"
)

// A listener keeps at most GATEHOUSE_SHED_MAX_CONNECTIONS connections
// open: beyond them a new connection is answered 503 (Retry-After, a body
// in every shape the listener's clients read) and closed, the idle
// keep-alive connections are closed to make room, and a connection made
// after that is served.
func TestConnectionBound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newEmbeddedApp(t, func(c *config.Config) { c.Shed.MaxConnections = 3 })
	ls, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ls) }()
	defer func() {
		cancel()
		<-done
	}()
	addr := ls.Public.Addr().String()

	// Three keep-alive connections, each answered once and left idle.
	var idle []net.Conn
	for range 3 {
		c, br := dial(t, addr)
		defer c.Close()
		if status, _ := get(t, c, br, "/healthz"); status != http.StatusOK {
			t.Fatalf("connection within the bound: HTTP %d", status)
		}
		idle = append(idle, c)
	}

	before := refusedConns(t, "public") // serving: the series exists

	// The fourth: 503 at once, in the envelope and the generic shape, then closed.
	c, br := dial(t, addr)
	defer c.Close()
	status, head, body := getFull(t, c, br, "/api/v1/orders/query?order_no=SO1001")
	if status != http.StatusServiceUnavailable || !strings.Contains(head, "Retry-After: 1") ||
		!strings.Contains(body, `"code":6000`) || !strings.Contains(body, `"error":"overloaded"`) {
		t.Fatalf("connection beyond the bound: HTTP %d\n%s\n%s", status, head, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("refused connection not closed after its answer: %v", err)
	}
	if got := refusedConns(t, "public") - before; got != 1 {
		t.Fatalf("gatehouse_http_connections_refused_total grew by %v, want 1", got)
	}

	// The idle connections are closed to make room...
	for i, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("idle connection %d still open after the bound was reached (%d bytes, %v)", i, n, err)
		}
	}
	// ...and a new connection is served.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, br := dial(t, addr)
		status, _ := get(t, c, br, "/healthz")
		c.Close()
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room made: HTTP %d", status)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The admin listener's refusal also speaks GraphQL.
	for range 3 {
		c, br := dial(t, ls.Admin.Addr().String())
		defer c.Close()
		if status, _ := get(t, c, br, "/healthz"); status != http.StatusOK {
			t.Fatalf("admin connection within the bound: HTTP %d", status)
		}
	}
	c, br = dial(t, ls.Admin.Addr().String())
	defer c.Close()
	if status, _, body := getFull(t, c, br, "/graphql"); status != http.StatusServiceUnavailable ||
		!strings.Contains(body, `"code":"OVERLOADED"`) {
		t.Fatalf("admin connection beyond the bound: HTTP %d %s", status, body)
	}
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

func get(t *testing.T, c net.Conn, br *bufio.Reader, path string) (int, string) {
	t.Helper()
	status, _, body := getFull(t, c, br, path)
	return status, body
}

// getFull sends GET path on c and reads the answer: status, header block
// and body.
func getFull(t *testing.T, c net.Conn, br *bufio.Reader, path string) (int, string, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: gatehouse\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var head strings.Builder
	_ = resp.Header.Write(&head)
	return resp.StatusCode, head.String(), string(b)
}

// refusedConns reads gatehouse_http_connections_refused_total{listener}.
func refusedConns(t *testing.T, listener string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gatehouse_http_connections_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelOf(m, "listener") == listener {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("gatehouse_http_connections_refused_total{listener=%q} not exported", listener)
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
