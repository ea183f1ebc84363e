package guard_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/apikey"
	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

const apiKeysQuery = `query($id: ID!) { apiKeys(where: {id: $id}) { edges { node { id name prefix status requestCount lastUsedAt } } } }`

// TestAPIKeyGuard: the three cases of the API key on /graphql, and a disabled
// key refused from the very next request.
func TestAPIKeyGuard(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		const q = `{"query":"{ apiKeys { totalCount } }"}`
		cases := []struct {
			name    string
			headers []string
			status  int
			err     string
		}{
			{"no header", nil, 401, "missing_api_key"},
			{"empty header", []string{"X-API-Key", ""}, 401, "missing_api_key"},
			{"blank header", []string{"X-API-Key", "   "}, 401, "missing_api_key"},
			{"unknown key", []string{"X-API-Key", "ghk_not-a-key-of-this-server-at-all"}, 401, "invalid_api_key"},
			{"key with a character changed", []string{"X-API-Key", a.Key[:len(a.Key)-1] + flip(a.Key[len(a.Key)-1])}, 401, "invalid_api_key"},
			{"huge key", []string{"X-API-Key", strings.Repeat("k", 4000)}, 401, "invalid_api_key"},
			{"valid key", []string{"X-API-Key", a.Key}, 200, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				for _, method := range []string{"POST", "GET"} {
					url, body := a.AdminURL+"/graphql", q
					if method == "GET" {
						url, body = a.AdminURL+"/graphql?query=%7B%20apiKeys%20%7B%20totalCount%20%7D%20%7D", ""
					}
					r := a.Do(t, method, url, body, append([]string{"Content-Type", "application/json"}, c.headers...)...)
					if r.Status != c.status {
						t.Fatalf("%s: status %d, want %d: %s", method, r.Status, c.status, r.Body)
					}
					if c.err == "" {
						if !strings.Contains(string(r.Body), `"totalCount":1`) {
							t.Fatalf("%s: %s", method, r.Body)
						}
						continue
					}
					m := r.Map(t)
					if m["error"] != c.err {
						t.Fatalf("%s: error %v, want %s: %s", method, m["error"], c.err, r.Body)
					}
					if strings.Contains(string(r.Body), a.Key) {
						t.Fatal("the refusal echoes the key")
					}
				}
			})
		}

		t.Run("two keys", func(t *testing.T) {
			req, _ := http.NewRequest("POST", a.AdminURL+"/graphql", strings.NewReader(q))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Add("X-API-Key", a.Key)
			req.Header.Add("X-API-Key", "other")
			resp, err := a.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})

		t.Run("disabled key stops at once", func(t *testing.T) {
			created := a.GQL(t, `mutation { createAPIKey(name: "short-lived") { key apiKey { id status } } }`, nil).OK(t, "createAPIKey")
			key, id := graphtest.Str(created, "key"), graphtest.Str(created, "apiKey", "id")
			graphtest.GQLAs(t, a.Env, key, `{ apiKeys { totalCount } }`, nil).OK(t, "apiKeys")
			dis := a.GQL(t, `mutation($id: ID!) { disableAPIKey(id: $id) { id status } }`, map[string]any{"id": id}).OK(t, "disableAPIKey")
			if graphtest.Num(dis, "status") != 0 {
				t.Fatalf("status after disable: %v", dis)
			}
			r := graphtest.GQLAs(t, a.Env, key, `{ apiKeys { totalCount } }`, nil)
			if r.Status != 401 || !strings.Contains(r.Body, `"invalid_api_key"`) {
				t.Fatalf("disabled key: HTTP %d %s", r.Status, r.Body)
			}
			// Disabling again is harmless; an unknown id is NOT_FOUND.
			a.GQL(t, `mutation($id: ID!) { disableAPIKey(id: $id) { status } }`, map[string]any{"id": id}).OK(t, "disableAPIKey")
			a.GQL(t, `mutation { disableAPIKey(id: 987654) { status } }`, nil).Fails(t, "NOT_FOUND")
		})

		t.Run("playground and health need no key", func(t *testing.T) {
			for _, p := range []string{"/", "/healthz"} {
				if r := a.Do(t, "GET", a.AdminURL+p, ""); r.Status != 200 {
					t.Fatalf("%s: %d", p, r.Status)
				}
			}
		})
	})
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

// TestAPIKeyUsageCount: each accepted call adds exactly 1 to requestCount,
// visible within a few seconds; refused calls add nothing; uses on two
// replicas sharing the database add up; a key disabled on one replica is
// refused by the other at once.
func TestAPIKeyUsageCount(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		// A second replica on the same database (and Redis).
		replica := apptest.Start(t, b, func(c *config.Config) {
			c.Database.URL = a.App.Cfg.Database.URL
			c.Auth.MasterKeyB64 = a.App.Cfg.Auth.MasterKeyB64
		})
		created := a.GQL(t, `mutation { createAPIKey(name: "counted") { key apiKey { id requestCount lastUsedAt } } }`, nil).OK(t, "createAPIKey")
		key, id := graphtest.Str(created, "key"), graphtest.Str(created, "apiKey", "id")
		if graphtest.Count64(created, "apiKey", "requestCount") != 0 || graphtest.Dig(created, "apiKey", "lastUsedAt") != nil {
			t.Fatalf("a new key: %v", created)
		}
		const perReplica = 15
		var wg sync.WaitGroup
		for _, e := range []*apptest.Env{a.Env, replica} {
			for range perReplica {
				wg.Go(func() {
					if r := graphtest.GQLAs(t, e, key, `{ skus { totalCount } }`, nil); r.Status != 200 {
						t.Errorf("HTTP %d: %s", r.Status, r.Body)
					}
				})
			}
		}
		wg.Wait()
		// Refused calls do not count.
		graphtest.GQLAs(t, a.Env, key+"x", `{ skus { totalCount } }`, nil)
		before := time.Now()
		var node map[string]any
		graphtest.Eventually(t, 10*time.Second, "requestCount reaches 30", func() bool {
			r := a.GQL(t, apiKeysQuery, map[string]any{"id": id})
			node, _ = graphtest.Dig(r.OK(t, "apiKeys"), "edges", 0, "node").(map[string]any)
			return graphtest.Count64(node, "requestCount") >= 2*perReplica
		})
		if got := graphtest.Count64(node, "requestCount"); got != 2*perReplica {
			t.Fatalf("requestCount %d, want %d", got, 2*perReplica)
		}
		last, err := time.Parse(time.RFC3339Nano, graphtest.Str(node, "lastUsedAt"))
		if err != nil || last.After(before) || time.Since(last) > time.Minute {
			t.Fatalf("lastUsedAt %q (%v)", graphtest.Str(node, "lastUsedAt"), err)
		}
		// Nothing is counted twice: after every replica flushed, still 30.
		for _, e := range []*apptest.Env{a.Env, replica} {
			if err := e.App.KeyUsage.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		r := a.GQL(t, apiKeysQuery, map[string]any{"id": id})
		if got := graphtest.Count64(r.OK(t, "apiKeys"), "edges", 0, "node", "requestCount"); got != 2*perReplica {
			t.Fatalf("requestCount %d after flushing, want %d", got, 2*perReplica)
		}

		// Disabled on one replica, refused by the other from the next request.
		a.GQL(t, `mutation($id: ID!) { disableAPIKey(id: $id) { id } }`, map[string]any{"id": id}).OK(t, "disableAPIKey")
		if r := graphtest.GQLAs(t, replica, key, `{ skus { totalCount } }`, nil); r.Status != 401 || !strings.Contains(r.Body, "invalid_api_key") {
			t.Fatalf("disabled key on the other replica: HTTP %d %s", r.Status, r.Body)
		}
	})
}

// TestAPIKeyUsageFlushedAtShutdown: counts still in memory are written by
// Close, even when the periodic flush never ran.
func TestAPIKeyUsageFlushedAtShutdown(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		cfg := apptest.Config(t, b)
		if err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a.Admin)
		e := &apptest.Env{App: a, AdminURL: srv.URL, Client: srv.Client()}
		row, key, err := a.APIKeys.Create(ctx, "shutdown", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			graphtest.GQLAs(t, e, key, `{ users { totalCount } }`, nil).OK(t, "users")
		}
		srv.Close()
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		// Read the row through a fresh connection: the app's is closed.
		db := graphtest.OpenDB(t, cfg.Database.URL)
		got, err := db.APIKey.Get(ctx, row.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.UsageCount != 3 || got.LastUsedAt == nil {
			t.Fatalf("after Close: usage_count %d, last_used_at %v", got.UsageCount, got.LastUsedAt)
		}
	})
}

// TestBootstrapAPIKey: GATEHOUSE_BOOTSTRAP_API_KEY exists and is enabled
// after every start, even after it was disabled.
func TestBootstrapAPIKey(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		boot := "boot-" + testenv.RandomSuffix() + "-0123456789abcdef"
		withBoot := func(dbURL string) apptest.Option {
			return func(c *config.Config) {
				c.Auth.BootstrapAPIKey = boot
				if dbURL != "" {
					c.Database.URL = dbURL
				}
			}
		}
		e := apptest.Start(t, b, withBoot(""))
		r := graphtest.GQLAs(t, e, boot, `{ apiKeys { edges { node { id name prefix status } } } }`, nil)
		node, _ := graphtest.Dig(r.OK(t, "apiKeys"), "edges", 0, "node").(map[string]any)
		if graphtest.Str(node, "prefix") != boot[:len(boot)/4] || graphtest.Num(node, "status") != 1 || !strings.Contains(graphtest.Str(node, "name"), "bootstrap") {
			t.Fatalf("bootstrap key: %v", node)
		}
		graphtest.GQLAs(t, e, boot, `mutation($id: ID!) { disableAPIKey(id: $id) { status } }`, map[string]any{"id": graphtest.Str(node, "id")}).OK(t, "disableAPIKey")
		if r := graphtest.GQLAs(t, e, boot, `{ apiKeys { totalCount } }`, nil); r.Status != 401 {
			t.Fatalf("disabled bootstrap key: %d", r.Status)
		}
		// A restart (another process on the same database) enables it
		// again, without creating a second row.
		again := apptest.Start(t, b, withBoot(e.App.Cfg.Database.URL))
		r = graphtest.GQLAs(t, again, boot, `{ apiKeys { totalCount edges { node { status } } } }`, nil)
		if got := r.OK(t, "apiKeys"); graphtest.Num(got, "totalCount") != 1 || graphtest.Num(got, "edges", 0, "node", "status") != 1 {
			t.Fatalf("after restart: %s", r.Body)
		}
	})
}
