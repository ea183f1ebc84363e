package fleettest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/demo"
	"gatehouse/internal/identity"
	"gatehouse/internal/testenv/fleet"
)

// TestEmbeddedRestartKeepsRevocations runs the gatehouse binary on its
// embedded store: a logged-out token stays refused after a graceful
// restart and after a kill -9 that follows the logout at once, and the
// tokens of a user disabled just before a kill -9 stay refused; a token
// that was not revoked keeps working until its user is disabled.
func TestEmbeddedRestartKeepsRevocations(t *testing.T) {
	t.Parallel()
	bin := gatehouseBinary(t)
	dataDir := t.TempDir()
	p := startProcess(t, bin, dataDir)
	a, b, c := p.login(t), p.login(t), p.login(t)

	p.logout(t, a)
	p.stop(t, syscall.SIGTERM)
	p = startProcess(t, bin, dataDir)
	if st := p.me(t, a); st != 401 {
		t.Fatalf("logged-out token after a graceful restart: %d, want 401", st)
	}
	if st := p.me(t, b); st != 200 {
		t.Fatalf("a token never revoked after a graceful restart: %d, want 200", st)
	}

	p.logout(t, b)
	p.stop(t, syscall.SIGKILL)
	p = startProcess(t, bin, dataDir)
	if st := p.me(t, b); st != 401 {
		t.Fatalf("token logged out just before kill -9, after the restart: %d, want 401", st)
	}
	if st := p.me(t, c); st != 200 {
		t.Fatalf("a token never revoked after kill -9: %d, want 200", st)
	}

	// Disable the demo user through the admin API (its GraphQL id is
	// the token's subject), then kill -9.
	var me struct {
		Sub string `json:"sub"`
	}
	p.do(t, "GET", p.base+"/api/auth/me", "", &me, "Authorization", "Bearer "+c)
	q := `{"query":"mutation { disableUser(id: \"` + me.Sub + `\") { id } }"}`
	var out struct {
		Errors []any `json:"errors"`
	}
	if st := p.do(t, "POST", p.admin+"/graphql", q, &out, "X-API-Key", demo.DemoAPIKey, "Content-Type", "application/json"); st != 200 || len(out.Errors) != 0 {
		t.Fatalf("disableUser: %d %v", st, out.Errors)
	}
	p.stop(t, syscall.SIGKILL)
	p = startProcess(t, bin, dataDir)
	if st := p.me(t, c); st != 401 {
		t.Fatalf("token of a user disabled just before kill -9, after the restart: %d, want 401", st)
	}
	p.stop(t, syscall.SIGTERM)
}

func (p *process) do(t *testing.T, method, url, body string, v any, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if v != nil {
		_ = json.Unmarshal(raw, v)
	}
	return res.StatusCode
}

func (p *process) login(t *testing.T) string {
	t.Helper()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	body := `{"username":"` + demo.DemoUsername + `","password":"` + demo.DemoPassword + `"}`
	if st := p.do(t, "POST", p.base+"/api/auth/login", body, &tok, "Content-Type", "application/json"); st != 200 || tok.AccessToken == "" {
		t.Fatalf("login: %d", st)
	}
	return tok.AccessToken
}

func (p *process) logout(t *testing.T, token string) {
	t.Helper()
	if st := p.do(t, "POST", p.base+"/auth/logout", "", nil, "Authorization", "Bearer "+token); st != 200 {
		t.Fatalf("logout: %d", st)
	}
}

func (p *process) me(t *testing.T, token string) int {
	t.Helper()
	return p.do(t, "GET", p.base+"/api/auth/me", "", nil, "Authorization", "Bearer "+token)
}

// TestSentinelFailoverKeepsRevocations: a logout and a disabled user's
// tokens stay refused after a Sentinel failover to a replica that missed
// those writes (their deny-list entry and user mark deleted from it
// before it is promoted), and a token that was not revoked works again
// once the new master answers.
func TestSentinelFailoverKeepsRevocations(t *testing.T) {
	t.Parallel()
	g := fleet.StartSentinelGroup(t)
	f := setup(t, g.URL())
	ctx := context.Background()
	victim, err := f.App.Users.Create(ctx, identity.NewUser{Username: "fleet-victim", Password: userPassword})
	if err != nil {
		t.Fatal(err)
	}
	out, kept := f.login(t), f.login(t)
	r := f.Do(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"fleet-victim","password":"`+userPassword+`"}`, "Content-Type", "application/json")
	var vt struct {
		AccessToken string `json:"access_token"`
	}
	r.JSON(t, &vt)
	if r := f.Do(t, "POST", f.PublicURL+"/auth/logout", "", "Authorization", "Bearer "+out); r.Status != 200 {
		t.Fatalf("logout: %d %s", r.Status, r.Body)
	}
	if _, err := f.App.Users.Disable(ctx, victim.ID); err != nil {
		t.Fatal(err)
	}

	// The replica misses those writes: once they reached it, they go.
	replica := g.Replica(t).Client()
	if err := replica.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	waitFor(t, 10*time.Second, func() bool {
		keys, err = replica.Keys(ctx, "fleet:jwt:*").Result()
		return err == nil && len(keys) >= 2
	})
	if err := replica.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	master := g.Failover(t)
	if n, err := master.Client().Keys(ctx, "fleet:jwt:*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("the new master holds %d revocation keys (%v): the test would not test the database", len(n), err)
	}
	waitFor(t, 15*time.Second, func() bool { return f.me(t, kept) == 200 })
	if st := f.me(t, out); st != 401 {
		t.Errorf("logged-out token after the failover: %d, want 401", st)
	}
	if st := f.me(t, vt.AccessToken); st != 401 {
		t.Errorf("disabled user's token after the failover: %d, want 401", st)
	}
}
