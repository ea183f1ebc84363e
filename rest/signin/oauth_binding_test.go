package signin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
)

// hiddenRequestID reads the pending request id out of an approval page's
// form, as a browser would post it.
var hiddenRequestID = regexp.MustCompile(`<input type="hidden" name="request_id" value="([^"]+)">`)

func approvalFormID(t *testing.T, page []byte) string {
	t.Helper()
	m := hiddenRequestID.FindSubmatch(page)
	if m == nil {
		t.Fatalf("approval page without a request id:\n%s", page)
	}
	return string(m[1])
}

// evilClient registers a second OAuth client, the attacker's, whose
// redirect URI records what it receives.
func evilClient(t *testing.T, f *auFix) (partner.App, string, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	redirect := srv.URL + "/steal"
	app, _, err := f.App.Partners.Create(context.Background(), partner.CreateInput{
		AppName: "Evil Corp", RedirectURIs: []string{redirect}, Scopes: []string{"orders:read", "profile"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return app, redirect, &hits
}

// TestOAuthApprovalSwap is the attack: the signed-in victim looks at the
// approval page of a harmless client; meanwhile a page of the attacker's
// sends the victim's browser to /oauth/authorize for the attacker's client
// (a top-level navigation carries the session cookie); the victim then
// clicks Approve on the harmless page. Only the harmless client may get a
// code. Then: two pending requests (two tabs) are decided independently.
func TestOAuthApprovalSwap(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		evil, evilRedirect, evilHits := evilClient(t, f)
		victim := auBrowser(t)
		f.signIn(t, victim, "alice", f.password, "")

		// The harmless approval page, as the victim's browser shows it.
		loc := auDo(t, victim, "GET", f.authorizeURL(nil), nil).location(t)
		page := auDo(t, victim, "GET", f.PublicURL+loc.String(), nil)
		if page.status != 200 || !strings.Contains(string(page.body), "Acme") {
			t.Fatalf("harmless approval page: HTTP %d\n%s", page.status, page.body)
		}
		shownID := approvalFormID(t, page.body)

		// The attacker's authorization request lands in between.
		q := url.Values{"client_id": {evil.AppKey}, "redirect_uri": {evilRedirect}, "response_type": {"code"}, "scope": {"orders:read"}, "state": {"evil"}}
		if loc := auDo(t, victim, "GET", f.PublicURL+"/oauth/authorize?"+q.Encode(), nil).location(t); loc.Path != "/oauth/approve" {
			t.Fatalf("attacker's authorize went to %s", loc)
		}

		// The victim clicks Approve on the page they saw.
		r := auForm(t, victim, f.PublicURL+"/oauth/confirm", url.Values{"approved": {"true"}, "request_id": {shownID}})
		got := r.location(t)
		if base := got.Scheme + "://" + got.Host + got.Path; base != f.redirect || got.Query().Get("code") == "" || got.Query().Get("state") != "st-123" {
			t.Fatalf("Approve on the harmless page redirected to %s", got)
		}
		if strings.HasPrefix(got.String(), evilRedirect) || evilHits.Load() != 0 {
			t.Fatal("the attacker's client received the approval")
		}
		// The code is the harmless client's, for the harmless scope.
		tok := f.exchange(t, got.Query().Get("code"))
		if tok["scope"] != "profile" {
			t.Fatalf("token scope %v", tok["scope"])
		}

		// Two tabs: two pending requests of one session, decided
		// independently, each going back to its own client.
		idA := f.authorize(t, victim, url.Values{"state": {"tab-a"}})
		idB := f.authorize(t, victim, url.Values{"state": {"tab-b"}, "scope": {"orders:read"}})
		if idA == idB {
			t.Fatal("two requests share an id")
		}
		if l := f.confirm(t, victim, idB, false).location(t); l.Query().Get("state") != "tab-b" || l.Query().Get("error") != "access_denied" {
			t.Fatalf("deny tab B: %s", l)
		}
		if l := f.confirm(t, victim, idA, true).location(t); l.Query().Get("state") != "tab-a" || l.Query().Get("code") == "" {
			t.Fatalf("approve tab A: %s", l)
		}
	})
}

// TestOAuthStrangersLeaveNoState floods the browser endpoints with
// cookie-less requests, as anyone on the internet can: nothing is stored
// (no session cookie is handed out, and on Redis the key count does not
// move), and each pending request comes back only in the browser's own
// sealed cookie.
func TestOAuthStrangersLeaveNoState(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		var rc *redis.Client
		countKeys := func() int {
			if rc == nil {
				return 0
			}
			n := 0
			iter := rc.Scan(context.Background(), 0, b.KeyPrefix+"*", 1000).Iterator()
			for iter.Next(context.Background()) {
				n++
			}
			if err := iter.Err(); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if !b.Embedded() {
			opt, err := redis.ParseURL(b.RedisURL)
			if err != nil {
				t.Fatal(err)
			}
			rc = redis.NewClient(opt)
			t.Cleanup(func() { rc.Close() })
		}
		before := countKeys()
		authorize := f.authorizeURL(nil)
		login := f.PublicURL + "/login?next=" + url.QueryEscape("/oauth/approve?request_id=x")
		const total = 10_000
		var next atomic.Int32
		var sessions, failures atomic.Int32
		var wg sync.WaitGroup
		client := &http.Client{
			Transport:     &http.Transport{MaxIdleConnsPerHost: 8},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		t.Cleanup(client.CloseIdleConnections)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > total {
						return
					}
					target, want := authorize, http.StatusFound
					if i%2 == 0 {
						target, want = login, http.StatusOK
					}
					resp, err := client.Get(target)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want {
						failures.Add(1)
					}
					for _, c := range resp.Cookies() {
						if c.Name == "gatehouse_session" {
							sessions.Add(1)
						}
					}
				}
			}()
		}
		wg.Wait()
		if n := failures.Load(); n != 0 {
			t.Fatalf("%d of %d requests had an unexpected status", n, total)
		}
		if n := sessions.Load(); n != 0 {
			t.Fatalf("%d session cookies handed to strangers", n)
		}
		if after := countKeys(); after != before {
			t.Fatalf("Redis keys under the prefix: %d before, %d after %d cookie-less requests", before, after, total)
		}
	})
}
