package fleettest_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// TestNonceMemoryFullOverHTTP: embedded with GATEHOUSE_NONCE_MEMORY_MAX=2,
// the third new signed request is refused 503/6000 with Retry-After (fail
// closed), a replay of a remembered one is still 4004, the store WARNs
// once, and the refusals are counted. (Acceptance after expiry, with an
// injected clock: admitstore's TestNonceMemoryBound.)
func TestNonceMemoryFullOverHTTP(t *testing.T) {
	t.Parallel()
	e := apptest.Start(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) { c.Redis.NonceMemoryMax = 2 })
	app, sec, err := e.App.Partners.Create(t.Context(), partner.CreateInput{AppName: "bound"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{Env: e, app: app, secret: sec.AppSecret}
	sign := func() string {
		q, err := partnerclient.Signer{AppKey: app.AppKey, AppSecret: sec.AppSecret}.Sign(url.Values{"order_no": {"X"}})
		if err != nil {
			t.Fatal(err)
		}
		return e.PublicURL + "/api/v1/orders/query?" + q.Encode()
	}
	first := sign()
	for _, u := range []string{first, sign()} {
		if r := f.call("GET", u); !admitted(r) {
			t.Fatalf("within the bound: %s", r)
		}
	}
	u := sign()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" {
		t.Fatalf("over the bound: HTTP %d Retry-After %q, want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if r := f.call("GET", sign()); r.status != 503 || r.code != 6000 {
		t.Fatalf("over the bound: %s, want 503/6000", r)
	}
	if r := f.call("GET", first); r.status != 401 || r.code != 4004 {
		t.Fatalf("replay while full: %s, want 401/4004", r)
	}
	if n := strings.Count(e.Logs.String(), "the replay memory is full"); n != 1 {
		t.Fatalf("%d WARNs about the full replay memory, want 1 (rate-limited)", n)
	}
	metrics := e.Do(t, "GET", e.AdminURL+"/metrics", "")
	if !strings.Contains(string(metrics.Body), "gatehouse_nonce_memory_full_total") {
		t.Fatal("no gatehouse_nonce_memory_full_total metric")
	}
}
