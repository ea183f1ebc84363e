package e2e_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
)

// TestRedisEvictionPolicy runs gatehouse on private redis-servers (the
// shared one's configuration is never touched): a policy that may evict
// keys (and so forget nonces, the deny-list and used codes) is refused at
// start with a message naming the fix, unless
// GATEHOUSE_REDIS_ALLOW_EVICTION=true (then a WARN); /readyz reports the
// policy, and a policy changed to evicting while running makes the kv
// store "degraded" (naming the policy), which takes the replica out of
// rotation (503) only with GATEHOUSE_READY_REQUIRES=kv.
func TestRedisEvictionPolicy(t *testing.T) {
	evicting := fleet.StartRedis(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	cfgFor := func(r *fleet.Redis, allow bool) config.Config {
		cfg := apptest.Config(t, testenv.Backend{Name: "sqlite"})
		cfg.Redis.URL = r.URL()
		cfg.Redis.AllowEviction = allow
		if err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	logs := &apptest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	a, err := app.New(context.Background(), cfgFor(evicting, false), log)
	if err == nil {
		a.Close(context.Background())
		t.Fatal("started on a Redis with maxmemory-policy allkeys-lru")
	}
	for _, want := range []string{`"allkeys-lru"`, "noeviction", "GATEHOUSE_REDIS_ALLOW_EVICTION=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal does not mention %s: %v", want, err)
		}
	}

	ready := func(e *apptest.Env) (int, map[string]string) {
		t.Helper()
		r := e.Do(t, "GET", e.PublicURL+"/readyz", "")
		var m map[string]string
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("readyz: %s", r.Body)
		}
		return r.Status, m
	}

	// Allowed: starts with a WARN, and readiness names the policy.
	e := apptest.Start(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) {
		c.Redis.URL, c.Redis.AllowEviction = evicting.URL(), true
	})
	if !strings.Contains(e.Logs.String(), "level=WARN") || !strings.Contains(e.Logs.String(), "maxmemory_policy=allkeys-lru") {
		t.Fatalf("no WARN about the evicting policy:\n%s", e.Logs.String())
	}
	if st, m := ready(e); st != 200 || m["kv_maxmemory_policy"] != "allkeys-lru" {
		t.Fatalf("readyz with eviction allowed: %d %v", st, m)
	}

	// noeviction: starts; someone changes the policy later.
	safe := fleet.StartRedis(t)
	e = apptest.Start(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) { c.Redis.URL = safe.URL() })
	if st, m := ready(e); st != 200 || m["kv_maxmemory_policy"] != "noeviction" {
		t.Fatalf("readyz on noeviction: %d %v", st, m)
	}
	strict := apptest.Start(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) { c.Redis.URL, c.Server.ReadyRequires = safe.URL(), "kv" })
	rc := safe.Client()
	if err := rc.ConfigSet(context.Background(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if st, m := ready(e); st != 200 || m["kv"] != "degraded" || m["kv_maxmemory_policy"] != "volatile-lru" || !strings.Contains(m["kv_detail"], "volatile-lru") {
		t.Fatalf("readyz after the policy became evicting: %d %v", st, m)
	}
	if st, m := ready(strict); st != 503 || m["kv"] != "degraded" || m["status"] != "kv_degraded" {
		t.Fatalf("readyz after the policy became evicting, GATEHOUSE_READY_REQUIRES=kv: %d %v", st, m)
	}
}
