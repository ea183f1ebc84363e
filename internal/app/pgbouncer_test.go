package app_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
	"gatehouse/rest/partnerclient"
)

// TestServeThroughPgBouncer: gatehouse starts (migrating) and serves
// through PgBouncer in transaction mode with no setting; without a direct
// URL start-up WARNs what is lost, with one it does not.
func TestServeThroughPgBouncer(t *testing.T) {
	t.Parallel()
	bouncer := fleet.StartPgBouncer(t, "transaction", "default_pool_size = 4")
	const warn = "GATEHOUSE_DATABASE_DIRECT_URL is not set"
	for _, withDirect := range []bool{false, true} {
		direct := testenv.PostgresURL(t)
		b := testenv.Backend{Name: "postgres", DatabaseURL: bouncer.URL(t, direct), RedisURL: testenv.RedisURL(t), KeyPrefix: testenv.KeyPrefix(t)}
		e := apptest.Start(t, b, func(c *config.Config) {
			if withDirect {
				c.Database.DirectURL = direct
			}
		})
		if got := strings.Contains(e.Logs.String(), warn); got == withDirect {
			t.Fatalf("direct URL %v: WARN %q logged: %v\n%s", withDirect, warn, got, e.Logs.String())
		}
		if !withDirect && !strings.Contains(e.Logs.String(), "level=WARN") {
			t.Fatal("the pooler's message is not a WARN")
		}
		for range 5 {
			if r := e.Do(t, "POST", e.PublicURL+"/api/tickets", `{"title":"through the pooler"}`, "Content-Type", "application/json"); r.Status != http.StatusCreated {
				t.Fatalf("create ticket: %d %s", r.Status, r.Body)
			}
		}
		if r := e.Do(t, "GET", e.PublicURL+"/api/tickets", ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "through the pooler") {
			t.Fatalf("list tickets: %d %s", r.Status, r.Body)
		}
		a, sec, err := e.App.Partners.Create(t.Context(), partner.CreateInput{AppName: "pooled"})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			q, err := partnerclient.Signer{AppKey: a.AppKey, AppSecret: sec.AppSecret}.Sign(url.Values{"order_no": {"SO-none"}})
			if err != nil {
				t.Fatal(err)
			}
			// Signed, verified, looked up: an unknown order.
			r := e.Do(t, "GET", e.PublicURL+"/api/v1/orders/query?"+q.Encode(), "")
			if r.Status != http.StatusNotFound {
				t.Fatalf("signed order query: %d %s", r.Status, r.Body)
			}
		}
	}
}
