package rest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/shed"
	"gatehouse/internal/testenv"
)

// shedTotal reads gatehouse_http_shed_total{listener}.
func shedTotal(t *testing.T, listener string) float64 {
	return listenerMetric(t, "gatehouse_http_shed_total", listener)
}

// sheddingAll reads gatehouse_http_shedding_all{listener}.
func sheddingAll(t *testing.T, listener string) float64 {
	return listenerMetric(t, "gatehouse_http_shedding_all", listener)
}

// listenerMetric reads the counter or gauge name{listener}.
func listenerMetric(t *testing.T, name, listener string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "listener" && l.GetValue() == listener {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{listener=%q}", name, listener)
	return 0
}

// tinyLimits: each listener admits one request at a time (and two health
// checks beyond it), so that a test fills the limit by holding one slot.
func tinyLimits(c *config.Config) {
	c.Shed.MinConcurrency, c.Shed.MaxConcurrency, c.Shed.Reserve = 1, 1, 2
}

// TestShedRefusesBeyondTheLimit: with each listener's limit held and the
// database closed, a ticket request, a signed query and a GraphQL request
// are refused at once — 503 with Retry-After, in the route's shape
// (ticket error "overloaded", partner envelope 6000, GraphQL
// extensions.code OVERLOADED) — so nothing reached the database (which
// would have answered "unavailable"); the refusals are counted per
// listener; the health checks and /metrics still answer on the reserve.
func TestShedRefusesBeyondTheLimit(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b, tinyLimits)
		signed := signedQueries(t, e, partner.CreateInput{})()
		if !e.App.Shed.Public.TryAcquire() || !e.App.Shed.Admin.TryAcquire() {
			t.Fatal("limits not free at start")
		}
		defer e.App.Shed.Public.Release()
		defer e.App.Shed.Admin.Release()
		if r := e.Do(t, http.MethodGet, e.PublicURL+"/readyz", ""); strings.Contains(string(r.Body), "overloaded") {
			t.Fatalf("/readyz refused with the limit full: %d %s", r.Status, r.Body)
		}
		if err := e.App.DB.Close(); err != nil {
			t.Fatal(err)
		}
		pub0, adm0 := shedTotal(t, "public"), shedTotal(t, "admin")
		start := time.Now()

		r := e.Do(t, http.MethodGet, e.PublicURL+"/api/tickets?limit=20", "")
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || r.Map(t)["error"] != "overloaded" {
			t.Fatalf("ticket page beyond the limit: %d Retry-After %q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
		}
		expectEnvelope(t, e.Do(t, http.MethodGet, signed, ""), http.StatusServiceUnavailable, 6000, "system busy: the server is overloaded")
		if r := e.Do(t, http.MethodGet, signed, ""); r.Header.Get("Retry-After") == "" {
			t.Fatal("signed query refused without Retry-After")
		}
		r = e.Do(t, http.MethodPost, e.AdminURL+"/graphql", `{"query":"{ __typename }"}`, apptest.JSONBody...)
		var gql struct {
			Errors []struct {
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(r.Body, &gql); err != nil || r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" ||
			len(gql.Errors) != 1 || gql.Errors[0].Extensions["code"] != "OVERLOADED" {
			t.Fatalf("GraphQL beyond the limit: %d Retry-After %q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("four refusals took %s: they waited for something", d)
		}
		if d := shedTotal(t, "public") - pub0; d != 3 {
			t.Fatalf("public shed counter rose by %v, want 3", d)
		}
		if d := shedTotal(t, "admin") - adm0; d != 1 {
			t.Fatalf("admin shed counter rose by %v, want 1", d)
		}
		for _, u := range []string{e.PublicURL + "/healthz", e.AdminURL + "/healthz", e.AdminURL + "/metrics"} {
			if r := e.Do(t, http.MethodGet, u, ""); r.Status != http.StatusOK {
				t.Fatalf("%s with the limit full: %d %s", u, r.Status, r.Body)
			}
		}
	})
}

// TestShedAdminKeepsItsRoom: the public listener's limit full does not
// take the admin listener's: a GraphQL request is admitted (and answered
// by the API-key check, not refused).
func TestShedAdminKeepsItsRoom(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b, tinyLimits)
		if !e.App.Shed.Public.TryAcquire() {
			t.Fatal("limit not free at start")
		}
		defer e.App.Shed.Public.Release()
		r := e.Do(t, http.MethodPost, e.AdminURL+"/graphql", `{"query":"{ __typename }"}`, apptest.JSONBody...)
		if r.Status == http.StatusServiceUnavailable || strings.Contains(string(r.Body), "OVERLOADED") {
			t.Fatalf("admin GraphQL refused while only the public listener is full: %d %s", r.Status, r.Body)
		}
	})
}

// TestShedRateLimitIsCheap: a 429 of an app's rate limit needs neither
// the database nor a free place behind the requests being served: with
// all but one place of the public limit taken by requests in flight and
// the database closed, the app's second call within its window is
// answered 429 (the app's credentials are cached, the window is in the
// key-value store), at once.
func TestShedRateLimitIsCheap(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b, func(c *config.Config) { c.Shed.MinConcurrency, c.Shed.MaxConcurrency = 2, 2 })
		one := 1
		next := signedQueries(t, e, partner.CreateInput{RateLimit: &one})
		query := func() apptest.Response { return e.Do(t, http.MethodGet, next(), "") }
		expectEnvelope(t, query(), http.StatusNotFound, 5001, "order does not exist") // takes the window's one slot; caches the app
		if !e.App.Shed.Public.TryAcquire() {
			t.Fatal("limit not free")
		}
		defer e.App.Shed.Public.Release()
		if err := e.App.DB.Close(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r := query()
		expectEnvelope(t, r, http.StatusTooManyRequests, 429, "too many requests")
		if r.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("429 took %s", d)
		}
	})
}

// TestShedEverythingNotReady: while the public listener refuses every
// request (its limit held, tickets sent all the time), /readyz answers 503
// "shedding_all" once shed.AllSeconds whole seconds have been refused and
// gatehouse_http_shedding_all{listener="public"} is 1; with the limit free
// and the requests served again, /readyz answers 200 within a few seconds.
func TestShedEverythingNotReady(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b, tinyLimits)
		if !e.App.Shed.Public.TryAcquire() {
			t.Fatal("limit not free at start")
		}
		released := false
		defer func() {
			if !released {
				e.App.Shed.Public.Release()
			}
		}()
		ready := func() (int, map[string]any) {
			r := e.Do(t, http.MethodGet, e.PublicURL+"/readyz", "")
			return r.Status, r.Map(t)
		}
		if st, body := ready(); st != http.StatusOK || body["shedding"] != "none" {
			t.Fatalf("/readyz before any refusal: %d %v", st, body)
		}
		// Keep requests coming, refused, until /readyz says so (or a deadline).
		waitReady := func(wantStatus int, wantWord string, refuse bool) map[string]any {
			t.Helper()
			deadline := time.Now().Add(time.Duration(shed.AllSeconds+5) * time.Second)
			for time.Now().Before(deadline) {
				for range 2 * shed.AllMinRequests {
					r := e.Do(t, http.MethodGet, e.PublicURL+"/api/tickets?limit=1", "")
					if refuse != (r.Status == http.StatusServiceUnavailable) {
						t.Fatalf("ticket page, limit held %v: %d %s", refuse, r.Status, r.Body)
					}
				}
				if st, body := ready(); st == wantStatus && body["status"] == wantWord {
					return body
				}
			}
			t.Fatalf("/readyz never answered %d %q", wantStatus, wantWord)
			return nil
		}
		body := waitReady(http.StatusServiceUnavailable, "shedding_all", true)
		if body["shedding"] != "all" {
			t.Fatalf("/readyz while shedding everything: %v", body)
		}
		if v := sheddingAll(t, "public"); v != 1 {
			t.Fatalf("gatehouse_http_shedding_all{public} %v while shedding everything", v)
		}
		e.App.Shed.Public.Release()
		released = true
		waitReady(http.StatusOK, "ready", false)
		if v := sheddingAll(t, "public"); v != 0 {
			t.Fatalf("gatehouse_http_shedding_all{public} %v after recovery", v)
		}
	})
}
