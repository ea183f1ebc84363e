package e2e_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// TestShutdownUnderLoad runs gatehouse's own listeners (App.Serve) under
// ticket load, with one request whose body is still arriving, and ends it
// the way SIGTERM does (its context). The in-flight slow request gets its
// 201; every ticket stored was answered with its 201 (no work done whose
// reply was lost); requests that arrive during the shutdown fail at the
// door without being processed; Serve returns without error.
//
// net/http closes, without a reply, a connection whose request headers
// it reads after Shutdown began (or that is still in the kernel's
// backlog); the test counts those separately: the client sees EOF or a
// reset, and nothing was done.
func TestShutdownUnderLoad(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		cfg := apptest.Config(t, b)
		if err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		logs := &apptest.SyncBuffer{}
		a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		ls, err := a.Listen()
		if err != nil {
			t.Fatal(err)
		}
		// Record which client connections the server accepted: one still in
		// the kernel's backlog when the listener closes was never the
		// server's, and its reset is not a request cut by the server.
		rec := &acceptRecorder{Listener: ls.Public, accepted: map[string]bool{}}
		ls.Public = rec
		base := "http://" + ls.Public.Addr().String()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		served := make(chan error, 1)
		go func() { served <- a.Serve(ctx, ls) }()

		// One new connection per request: a refused request is then a
		// refused connect, never a reused idle connection closing under it.
		dialer := &net.Dialer{}
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if slot, ok := ctx.Value(localAddrKey{}).(*string); ok && err == nil {
					*slot = c.LocalAddr().String()
				}
				return c, err
			},
		}}
		// post reports whether the server accepted the connection, too.
		post := func(body io.Reader) (status int, accepted bool, err error) {
			var local string
			defer func() { accepted = local != "" && rec.has(local) }()
			req, _ := http.NewRequestWithContext(context.WithValue(context.Background(), localAddrKey{}, &local), "POST", base+"/api/tickets", body)
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				return 0, false, err
			}
			defer res.Body.Close()
			if _, err := io.ReadAll(res.Body); err != nil {
				return res.StatusCode, false, err
			}
			return res.StatusCode, false, nil
		}
		if s, _, err := post(strings.NewReader(`{"title":"warm"}`)); err != nil || s != 201 {
			t.Fatalf("before: %d %v", s, err)
		}

		// The slow request: headers and half the body now, the rest after
		// shutdown began.
		pr, pw := io.Pipe()
		slow := make(chan error, 1)
		go func() {
			s, _, err := post(pr)
			if err == nil && s != 201 {
				err = errors.New("slow request: HTTP " + http.StatusText(s))
			}
			slow <- err
		}()
		if _, err := io.WriteString(pw, `{"title":"slow `); err != nil {
			t.Fatal(err)
		}

		var (
			mu               sync.Mutex
			ok, gone, unread int
			wrong            []string
			wg               sync.WaitGroup
		)
		for range 6 {
			wg.Go(func() {
				for {
					s, accepted, err := post(strings.NewReader(`{"title":"load"}`))
					mu.Lock()
					switch {
					case err == nil && s == 201:
						ok++
					case err != nil && !accepted:
						gone++ // refused, or reset while still in the backlog
					case err != nil:
						unread++ // accepted, closed by net/http without a reply
					default:
						wrong = append(wrong, http.StatusText(s))
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
		// Let the load run, then "SIGTERM".
		<-time.After(300 * time.Millisecond)
		cancel()
		<-time.After(200 * time.Millisecond) // shutdown has begun: the slow body finishes now
		if _, err := io.WriteString(pw, `one"}`); err != nil {
			t.Fatalf("the server dropped the slow request: %v", err)
		}
		pw.Close()
		if err := <-slow; err != nil {
			t.Fatalf("in-flight request cut by the shutdown: %v", err)
		}
		wg.Wait()
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("Serve did not return")
		}
		if len(wrong) > 0 {
			t.Fatalf("%d replies other than 201, e.g. %s", len(wrong), wrong[0])
		}
		if ok == 0 || gone+unread == 0 {
			t.Fatalf("load did not span the shutdown: %d served, %d refused", ok, gone+unread)
		}
		// Every stored ticket was answered: warm + slow + the load's 201s.
		db, err := store.Open(context.Background(), cfg.Database.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		n, err := db.Client.Ticket.Query().Count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n != ok+2 {
			t.Fatalf("%d tickets stored but %d created replies received: work done whose reply was lost", n, ok+2)
		}
		t.Logf("%d requests served, %d refused at connect, %d closed unread by net/http; %d tickets stored", ok, gone, unread, n)
	})
}

// localAddrKey carries a *string the dialer fills with the connection's
// local address.
type localAddrKey struct{}

// acceptRecorder remembers the remote address of every accepted connection.
type acceptRecorder struct {
	net.Listener
	mu       sync.Mutex
	accepted map[string]bool
}

func (l *acceptRecorder) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.accepted[c.RemoteAddr().String()] = true
		l.mu.Unlock()
	}
	return c, err
}

func (l *acceptRecorder) has(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted[addr]
}
