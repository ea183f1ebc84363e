package partnerapi_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
)

// TestPartnerReplay: a nonce is single-use per app, also under concurrency
// and (Postgres + Redis) across two instances sharing the backend.
func TestPartnerReplay(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e1 := apptest.Start(t, b, sharedKeyOption())
		app, sec := createApp(t, e1, partner.CreateInput{})
		createOrder(t, e1, order.CreateInput{AppID: app.ID, OrderNo: "R1", Amount: "1.00"})
		q := signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "R1"})
		call(t, e1, "GET", orderURL(e1, "v1")+q).expect(t, 200, 200, "success")
		call(t, e1, "GET", orderURL(e1, "v1")+q).expect(t, 401, 4004, "duplicate request")

		// Concurrent copies of one request: exactly one gets through.
		q = signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "R1"})
		codes := parallelCodes(t, 16, func(int) string { return orderURL(e1, "v1") + q }, e1.Client)
		if codes[200] != 1 || codes[4004] != 15 {
			t.Fatalf("16 concurrent copies: codes %v, want one 200 and fifteen 4004", codes)
		}
	})
}

func TestPartnerReplayAcrossInstances(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("the in-process store is per instance by design (one replica); shared state needs Redis")
		}
		e1, e2 := startPair(t, b)
		app, sec := createApp(t, e1, partner.CreateInput{})
		createOrder(t, e1, order.CreateInput{AppID: app.ID, OrderNo: "R2", Amount: "2.00"})
		q := signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "R2"})
		call(t, e1, "GET", orderURL(e1, "v1")+q).expect(t, 200, 200, "success")
		call(t, e2, "GET", orderURL(e2, "v1")+q).expect(t, 401, 4004, "duplicate request")
		call(t, e2, "GET", orderURL(e2, "v2")+q).expect(t, 401, 4004, "duplicate request")

		// Copies raced at both instances at once: still exactly one.
		q = signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "R2"})
		codes := parallelCodes(t, 16, func(i int) string {
			if i%2 == 0 {
				return orderURL(e1, "v1") + q
			}
			return orderURL(e2, "v1") + q
		}, e1.Client)
		if codes[200] != 1 || codes[4004] != 15 {
			t.Fatalf("16 copies over two instances: codes %v, want one 200 and fifteen 4004", codes)
		}
	})
}

// parallelCodes sends n GETs at once (released together) and counts the
// envelope codes.
func parallelCodes(t *testing.T, n int, urlOf func(i int) string, c *http.Client) map[int]int {
	t.Helper()
	res := parallel(t, n, urlOf, c)
	codes := map[int]int{}
	for _, r := range res {
		codes[r.Code]++
	}
	return codes
}

func parallel(t *testing.T, n int, urlOf func(i int) string, c *http.Client) []envelope {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = urlOf(i)
	}
	type result struct {
		status int
		header http.Header
		body   []byte
		err    error
	}
	out := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i].status, out[i].header, out[i].body, out[i].err = get(c, "GET", urls[i])
		}()
	}
	close(start)
	wg.Wait()
	envs := make([]envelope, n)
	for i, r := range out {
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		envs[i] = decodeEnvelope(t, r.status, r.header, r.body)
	}
	return envs
}

// TestPartnerRotation: after a rotation the old and the new secret both
// verify; the old one stops 24 h after the rotation. The service's clock is
// moved back to rotate "23 h ago" and "25 h ago".
func TestPartnerRotation(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		ctx := context.Background()
		ok := func(key, secret string) bool {
			r := call(t, e, "GET", orderURL(e, "v1")+signedQuery(key, secret, nowMillis(), freshNonce(), pair{"order_no", "none"}))
			return r.Code == 5001
		}
		app, s0 := createApp(t, e, partner.CreateInput{})
		if !ok(app.AppKey, s0) {
			t.Fatal("fresh secret does not verify")
		}
		rotated, s1, err := e.App.Partners.RotateSecret(ctx, app.ID)
		if err != nil || s1 == "" || s1 == s0 {
			t.Fatalf("rotate: %q %v", s1, err)
		}
		if rotated.PreviousSecretExpiresAt == nil || time.Until(*rotated.PreviousSecretExpiresAt) < 23*time.Hour+59*time.Minute {
			t.Fatalf("previous secret valid until %v, want 24 h from now", rotated.PreviousSecretExpiresAt)
		}
		if !ok(app.AppKey, s0) || !ok(app.AppKey, s1) {
			t.Fatal("during the overlap both secrets must verify")
		}

		// Rotated 23 h ago: the previous secret still has an hour.
		svc23, err := partner.NewService(e.App.DB.Client, e.App.Cfg.MasterKey, partner.WithClock(func() time.Time { return time.Now().Add(-23 * time.Hour) }))
		if err != nil {
			t.Fatal(err)
		}
		a2, t0 := createApp(t, e, partner.CreateInput{})
		_, t1, err := svc23.RotateSecret(ctx, a2.ID)
		if err != nil {
			t.Fatal(err)
		}
		// svc23 is another service than the app's own: its write reaches the
		// app's cache within the cache TTL, as a write on another replica would.
		eventually(t, time.Second, "new secret verifies", func() bool { return ok(a2.AppKey, t1) })
		if !ok(a2.AppKey, t0) {
			t.Fatal("a secret rotated out 23 h ago must still verify")
		}

		// Rotated 25 h ago: the previous secret no longer verifies.
		svc25, err := partner.NewService(e.App.DB.Client, e.App.Cfg.MasterKey, partner.WithClock(func() time.Time { return time.Now().Add(-25 * time.Hour) }))
		if err != nil {
			t.Fatal(err)
		}
		a3, u0 := createApp(t, e, partner.CreateInput{})
		if !ok(a3.AppKey, u0) {
			t.Fatal("fresh secret does not verify")
		}
		_, u1, err := svc25.RotateSecret(ctx, a3.ID)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Second, "old secret refused after 24 h", func() bool { return !ok(a3.AppKey, u0) })
		r := call(t, e, "GET", orderURL(e, "v1")+signedQuery(a3.AppKey, u0, nowMillis(), freshNonce(), pair{"order_no", "none"}))
		r.expect(t, 401, 4002, "signature verification failed")
		if !ok(a3.AppKey, u1) {
			t.Fatal("the new secret must verify")
		}

		// The webhook secret rotates the same way.
		_, w1, err := e.App.Partners.RotateWebhookSecret(ctx, app.ID)
		if err != nil {
			t.Fatal(err)
		}
		ws := apptest.WebhookSecrets(t, e, app.ID)
		if len(ws) != 2 || ws[0] != w1 {
			t.Fatalf("webhook secrets after rotation: %d (want the new one first, then the old)", len(ws))
		}
	})
}

// TestPartnerChangesReachReplicas: disabling an app, a new rate limit and a
// rotation made through one instance take effect on another within 1 s.
func TestPartnerChangesReachReplicas(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var e1, e2 *apptest.Env
		if b.Embedded() {
			e1 = apptest.Start(t, b)
			e2 = e1
		} else {
			e1, e2 = startPair(t, b)
		}
		ctx := context.Background()
		app, sec := createApp(t, e1, partner.CreateInput{})
		codeAt := func(e *apptest.Env, secret string) int {
			return call(t, e, "GET", orderURL(e, "v1")+signedQuery(app.AppKey, secret, nowMillis(), freshNonce(), pair{"order_no", "none"})).Code
		}
		if c := codeAt(e2, sec); c != 5001 {
			t.Fatalf("before: code %d", c)
		}
		// Disable on e1; e2 (whose cache holds the app) follows within 1 s.
		off := partner.Disabled
		if _, err := e1.App.Partners.Update(ctx, app.ID, partner.UpdateInput{Status: &off}); err != nil {
			t.Fatal(err)
		}
		if d := eventually(t, 2*time.Second, "disabled app refused", func() bool { return codeAt(e2, sec) == 4001 }); d > time.Second {
			t.Fatalf("disable took %v to reach the other instance", d)
		}
		on := partner.Enabled
		if _, err := e1.App.Partners.Update(ctx, app.ID, partner.UpdateInput{Status: &on}); err != nil {
			t.Fatal(err)
		}
		if d := eventually(t, 2*time.Second, "re-enabled app admitted", func() bool { return codeAt(e2, sec) == 5001 }); d > time.Second {
			t.Fatalf("enable took %v", d)
		}
		// Rotation: the new secret works on e2 within 1 s.
		_, s1, err := e1.App.Partners.RotateSecret(ctx, app.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := eventually(t, 2*time.Second, "rotated secret verifies", func() bool { return codeAt(e2, s1) == 5001 }); d > time.Second {
			t.Fatalf("rotation took %v", d)
		}
		// A new rate limit is applied within 1 s.
		one := 1
		if _, err := e1.App.Partners.Update(ctx, app.ID, partner.UpdateInput{RateLimit: &one}); err != nil {
			t.Fatal(err)
		}
		d := eventually(t, 2*time.Second, "rate limit 1 applied", func() bool {
			r := call(t, e2, "GET", orderURL(e2, "v1")+signedQuery(app.AppKey, s1, nowMillis(), freshNonce(), pair{"order_no", "none"}))
			return r.header.Get("X-RateLimit-Limit") == "1"
		})
		if d > time.Second {
			t.Fatalf("rate limit change took %v", d)
		}
	})
}

// TestPartnerRateLimit: with rate_limit 5, of 20 requests sent at once
// exactly 5 pass; the others get 429 with Retry-After and X-RateLimit-*,
// and are not counted: the window frees one second after the first pass
// even while refused requests keep arriving.
func TestPartnerRateLimit(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		five := 5
		app, sec := createApp(t, e, partner.CreateInput{RateLimit: &five})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "L1", Amount: "1.00"})
		// Warm the app cache without taking a slot (a bad signature is not counted).
		call(t, e, "GET", orderURL(e, "v1")+signedQuery(app.AppKey, "wrong", nowMillis(), freshNonce(), pair{"order_no", "L1"})).expect(t, 401, 4002, "signature")

		start := time.Now()
		res := parallel(t, 20, func(int) string {
			return orderURL(e, "v1") + signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "L1"})
		}, e.Client)
		burst := time.Since(start)
		if burst >= time.Second {
			t.Fatalf("the burst took %v: it must fit one window to be checked exactly", burst)
		}
		remaining := map[string]int{}
		var passed, limited int
		for _, r := range res {
			switch r.Code {
			case 200:
				passed++
				if r.header.Get("X-RateLimit-Limit") != "5" {
					t.Fatalf("X-RateLimit-Limit = %q", r.header.Get("X-RateLimit-Limit"))
				}
				remaining[r.header.Get("X-RateLimit-Remaining")]++
			case 429:
				limited++
				r.expect(t, 429, 429, "too many requests")
				ra, err := strconv.Atoi(r.header.Get("Retry-After"))
				if err != nil || ra < 1 || ra > 1 {
					t.Fatalf("Retry-After = %q, want 1 (seconds, rounded up)", r.header.Get("Retry-After"))
				}
				if r.header.Get("X-RateLimit-Limit") != "5" || r.header.Get("X-RateLimit-Remaining") != "0" {
					t.Fatalf("429 headers: limit %q remaining %q", r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"))
				}
			default:
				t.Fatalf("unexpected reply %d %s", r.status, r.body)
			}
		}
		if passed != 5 || limited != 15 {
			t.Fatalf("passed %d, limited %d; want 5 and 15", passed, limited)
		}
		for _, left := range []string{"0", "1", "2", "3", "4"} {
			if remaining[left] != 1 {
				t.Fatalf("X-RateLimit-Remaining values %v, want 4,3,2,1,0 once each", remaining)
			}
		}
		// Keep knocking: refused requests do not extend the window, so a
		// request passes again about 1 s after the first burst.
		var again time.Duration
		eventually(t, 3*time.Second, "a request passes once the window moved", func() bool {
			r := call(t, e, "GET", orderURL(e, "v1")+signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "L1"}))
			again = time.Since(start)
			return r.Code == 200
		})
		if again > 1500*time.Millisecond+burst {
			t.Fatalf("passed again only after %v: refused requests seem to be counted", again)
		}
	})
}

// TestPartnerRateLimitAcrossInstances: two instances sharing Redis apply
// one limit.
func TestPartnerRateLimitAcrossInstances(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("the in-process store is per instance by design (one replica); shared state needs Redis")
		}
		e1, e2 := startPair(t, b)
		six := 6
		app, sec := createApp(t, e1, partner.CreateInput{RateLimit: &six})
		for _, e := range []*apptest.Env{e1, e2} {
			call(t, e, "GET", orderURL(e, "v1")+signedQuery(app.AppKey, "wrong", nowMillis(), freshNonce(), pair{"order_no", "x"})).expect(t, 401, 4002, "signature")
		}
		start := time.Now()
		codes := parallelCodes(t, 24, func(i int) string {
			e := e1
			if i%2 == 1 {
				e = e2
			}
			return orderURL(e, "v1") + signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "x"})
		}, e1.Client)
		if d := time.Since(start); d >= time.Second {
			t.Fatalf("the burst took %v: it must fit one window to be checked exactly", d)
		}
		if codes[5001] != 6 || codes[429] != 18 {
			t.Fatalf("24 requests over two instances with limit 6: codes %v, want six 5001 and eighteen 429", codes)
		}
	})
}
