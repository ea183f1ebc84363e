package rollingtest_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
	"gatehouse/rest/partnerclient"
)

// TestClusterShardLostBehindHAProxy: two gatehouse processes on Postgres
// and a 3-master Redis Cluster (cluster-require-full-coverage no), behind
// HAProxy running compose.yaml's configuration, lose one master (SIGKILL)
// under a steady load. A shared dependency failing in part must not empty
// the balancer: /readyz stays 200 on both replicas (with kv "degraded"),
// HAProxy keeps both servers UP, the apps whose keys live on the other
// shards are served (≥ 99 % of their calls), ticket creation and the
// GraphQL admin (no Redis) are served without a failure, and every call of
// an app whose keys lived on the lost shard answers 503/6000 within 1 s.
func TestClusterShardLostBehindHAProxy(t *testing.T) {
	t.Parallel()
	haproxy := haproxyBinary(t)
	bin := gatehouseBinary(t)
	cluster := fleet.StartCluster(t, 3, "--cluster-require-full-coverage", "no")
	b := testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(t), RedisURL: cluster.URL(), KeyPrefix: "shard:"}
	masterKey := base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
	jwtSecret := base64.StdEncoding.EncodeToString(secret.RandomBytes(32))

	// Apps, their order and an admin key, made in-process on the same storage.
	e := apptest.Start(t, b, func(c *config.Config) { c.Auth.MasterKeyB64, c.Auth.JWTSecretRaw = masterKey, jwtSecret })
	ctx := context.Background()
	type appKeys struct {
		key, secret, order string
		lost               bool // its keys live on the master that is killed
	}
	var apps []*appKeys
	for i := range 24 {
		pa, sec, err := e.App.Partners.Create(ctx, partner.CreateInput{AppName: "shard " + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.App.Orders.Create(ctx, order.CreateInput{AppID: pa.ID, OrderNo: "SO-SHARD-" + strconv.Itoa(i), Amount: "1.00"}); err != nil {
			t.Fatal(err)
		}
		apps = append(apps, &appKeys{key: pa.AppKey, secret: sec.AppSecret, order: "SO-SHARD-" + strconv.Itoa(i)})
	}
	_, adminKey, err := e.App.APIKeys.Create(ctx, "shard test", apikey.RoleReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	// The admission keys of an app share the hash tag {len:app_key}
	// (kv.admitKeys): the master serving that slot is the app's.
	owner := func(a *appKeys) *fleet.Redis {
		return cluster.Owner(t, "{"+strconv.Itoa(len(a.key))+":"+a.key+"}")
	}
	victim := owner(apps[0])
	var lostApps, liveApps int
	for _, a := range apps {
		a.lost = owner(a) == victim
		if a.lost {
			lostApps++
		} else {
			liveApps++
		}
	}
	if liveApps == 0 {
		t.Fatal("every app lives on one master: no app to serve from the others")
	}

	env := append(os.Environ(), "GATEHOUSE_DATABASE_URL="+b.DatabaseURL, "GATEHOUSE_REDIS_URL="+b.RedisURL,
		"GATEHOUSE_REDIS_PREFIX="+b.KeyPrefix, "GATEHOUSE_MASTER_KEY="+masterKey, "GATEHOUSE_JWT_SECRET="+jwtSecret,
		"GATEHOUSE_LOG_LEVEL=info")
	replicas := []*replica{{addr: freeAddr(t), admin: freeAddr(t)}, {addr: freeAddr(t), admin: freeAddr(t)}}
	for _, r := range replicas {
		r.start(t, bin, env)
	}
	for _, r := range replicas {
		r.waitReady(t)
	}
	lb := startHAProxy(t, haproxy, replicas)
	lb.waitUp(t, 2)

	client := &http.Client{Timeout: 10 * time.Second}
	signed := func(a *appKeys) (status, code int, took time.Duration, err error) {
		q, err := partnerclient.Signer{AppKey: a.key, AppSecret: a.secret}.Sign(url.Values{"order_no": {a.order}})
		if err != nil {
			return 0, 0, 0, err
		}
		t0 := time.Now()
		resp, err := client.Get(lb.url + "/api/v1/orders/query?" + q.Encode())
		if err != nil {
			return 0, 0, time.Since(t0), err
		}
		defer resp.Body.Close()
		var env struct{ Code int }
		err = json.NewDecoder(resp.Body).Decode(&env)
		return resp.StatusCode, env.Code, time.Since(t0), err
	}
	// Every app is admitted once before the loss, so that its replay
	// memory's start is recorded on its own master.
	for _, a := range apps {
		if st, code, _, err := signed(a); err != nil || st != 200 || code != 200 {
			t.Fatalf("signed call before the loss: %d/%d %v", st, code, err)
		}
	}

	victim.Kill()
	killed := time.Now()

	var liveOK, liveFailed, lostRight, lostWrong, ticketOK, ticketFailed, adminOK, adminFailed, readyFailed atomic.Int64
	var slowest atomic.Int64 // the slowest lost-shard answer (ns)
	var failures sync.Map
	note := func(what string) { failures.Store(what, true) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	running := func() bool {
		select {
		case <-stop:
			return false
		default:
			return true
		}
	}
	// Live-shard and lost-shard apps have workers of their own, so that
	// the live apps' load does not wait behind the lost ones' answers
	// (each up to a second, while the cluster client learns the master
	// is gone) and its count says what the replicas served, not how slow
	// the other calls were.
	var live, lost []*appKeys
	for _, a := range apps {
		if a.lost {
			lost = append(lost, a)
		} else {
			live = append(live, a)
		}
	}
	for w := range 5 {
		group := live
		if w >= 3 {
			group = lost
		}
		if len(group) == 0 {
			continue
		}
		wg.Go(func() {
			for i := w; running(); i++ {
				a := group[i%len(group)]
				st, code, took, err := signed(a)
				switch {
				case !a.lost && err == nil && st == 200 && code == 200:
					liveOK.Add(1)
				case !a.lost:
					liveFailed.Add(1)
					note(fmt.Sprintf("live shard: %d/%d %v", st, code, err))
				case err == nil && st == 503 && code == 6000 && took <= time.Second:
					lostRight.Add(1)
				default:
					lostWrong.Add(1)
					note(fmt.Sprintf("lost shard: %d/%d in %v %v", st, code, took, err))
				}
				if a.lost {
					for cur := slowest.Load(); int64(took) > cur && !slowest.CompareAndSwap(cur, int64(took)); cur = slowest.Load() {
					}
				}
				time.Sleep(5 * time.Millisecond) // a steady rate, not a flood
			}
		})
	}
	post := func(u, body string, headers ...string) (int, string) {
		req, err := http.NewRequest("POST", u, strings.NewReader(body))
		if err != nil {
			return 0, err.Error()
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	wg.Go(func() {
		for i := 0; running(); i++ {
			if st, body := post(lb.url+"/api/tickets", `{"title":"shard lost `+strconv.Itoa(i)+`"}`); st == 201 {
				ticketOK.Add(1)
			} else {
				ticketFailed.Add(1)
				note(fmt.Sprintf("ticket: %d %.200s", st, body))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for running() {
			st, body := post(lb.admin+"/graphql", `{"query":"{ apiKeys(first: 1) { totalCount } }"}`, "X-API-Key", adminKey)
			if st == 200 && !strings.Contains(body, `"errors"`) {
				adminOK.Add(1)
			} else {
				adminFailed.Add(1)
				note(fmt.Sprintf("admin: %d %.200s", st, body))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	var degradedSeen atomic.Bool
	wg.Go(func() {
		for running() {
			for _, r := range replicas {
				resp, err := client.Get("http://" + r.addr + "/readyz")
				if err != nil {
					readyFailed.Add(1)
					note("readyz: " + err.Error())
					continue
				}
				var m map[string]string
				_ = json.NewDecoder(resp.Body).Decode(&m)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					readyFailed.Add(1)
					note(fmt.Sprintf("readyz: %d %v", resp.StatusCode, m))
				}
				if m["kv"] == "degraded" {
					degradedSeen.Store(true)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	time.Sleep(8 * time.Second)
	up := lb.upCount(t)
	close(stop)
	wg.Wait()

	t.Logf("after the loss of master %s (%d of %d apps on it), %v of load: live-shard apps %d served, %d failed; lost-shard apps %d answered 503/6000 within 1 s, %d otherwise (slowest %v); tickets %d/%d; admin %d/%d; readyz failures %d; HAProxy servers UP %d",
		victim.Addr(), lostApps, len(apps), time.Since(killed).Round(time.Millisecond), liveOK.Load(), liveFailed.Load(),
		lostRight.Load(), lostWrong.Load(), time.Duration(slowest.Load()).Round(time.Millisecond),
		ticketOK.Load(), ticketOK.Load()+ticketFailed.Load(), adminOK.Load(), adminOK.Load()+adminFailed.Load(), readyFailed.Load(), up)
	var msgs []string
	failures.Range(func(k, _ any) bool { msgs = append(msgs, k.(string)); return true })
	if len(msgs) > 10 {
		msgs = msgs[:10]
	}
	switch total := liveOK.Load() + liveFailed.Load(); {
	case total < 100:
		t.Errorf("only %d calls of live-shard apps: the load did not run", total)
	case float64(liveOK.Load()) < 0.99*float64(total):
		t.Errorf("live-shard apps: %d of %d served, want ≥ 99 %%", liveOK.Load(), total)
	}
	if lostApps > 0 && (lostWrong.Load() != 0 || lostRight.Load() == 0) {
		t.Errorf("lost-shard apps: %d answered 503/6000 within 1 s, %d otherwise", lostRight.Load(), lostWrong.Load())
	}
	if ticketFailed.Load() != 0 || ticketOK.Load() == 0 || adminFailed.Load() != 0 || adminOK.Load() == 0 {
		t.Errorf("tickets %d failed of %d, admin %d failed of %d: want none failed", ticketFailed.Load(), ticketOK.Load()+ticketFailed.Load(), adminFailed.Load(), adminOK.Load()+adminFailed.Load())
	}
	// Unaffected means not slowed either: the admin's checks of its API
	// key must not wait out a lost master's timeout on every request
	// (the key mirror's change mark may live on it). The two loops pace
	// alike, 10 ms between calls.
	if a, tk := adminOK.Load(), ticketOK.Load(); 2*a < tk {
		t.Errorf("admin calls %d against %d ticket creations at the same pace: the admin waited on the lost master", a, tk)
	}
	if readyFailed.Load() != 0 || up != 2 {
		t.Errorf("readyz failed %d times; HAProxy servers UP %d, want 2", readyFailed.Load(), up)
	}
	if !degradedSeen.Load() {
		t.Error(`readyz never said kv "degraded" after a master was lost`)
	}
	if t.Failed() {
		t.Logf("some failures: %s", strings.Join(msgs, "; "))
	}
}
