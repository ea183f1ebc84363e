package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"gatehouse/ent/partnerapp"
	"gatehouse/internal/errs"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// The success path: one attempt, signed so that the official Standard
// Webhooks library verifies it, the documented message body, everything stored.
// The poll interval is an hour: only the in-process wake-up can make the
// first attempt arrive in time.
func TestDeliverySucceedsSignedAndStored(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusOK))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, PollInterval: time.Hour})
		appID, whsec := e.newApp(t, rcv.URL+"/hooks?token=partner-own-token")

		start := time.Now()
		d := e.pay(t, appID)
		waitFor(t, 5*time.Second, func() bool { return rcv.count() == 1 }, func() string { return "no request arrived" })
		if lat := time.Since(start); lat > 3*time.Second {
			t.Errorf("first attempt after %s: not immediate", lat)
		}
		d = e.waitStatus(t, d.ID, dispatch.StatusSuccess, 5*time.Second)
		got := rcv.requests()[0]

		wh, err := standardwebhooks.NewWebhook(whsec)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got.body, got.header); err != nil {
			t.Fatalf("Standard Webhooks verification: %v", err)
		}
		sig := got.header.Get("webhook-signature")
		if !strings.HasPrefix(sig, "v1,") || strings.Contains(sig, " ") {
			t.Errorf("webhook-signature = %q, want one v1 signature", sig)
		}
		if legacy := got.header.Get("X-Webhook-Signature"); legacy != sig {
			t.Errorf("X-Webhook-Signature = %q, want %q", legacy, sig)
		}
		if id := got.header.Get("webhook-id"); id != d.EventID || !strings.HasPrefix(id, "msg_") {
			t.Errorf("webhook-id = %q, want the event id %q", id, d.EventID)
		}
		ts, err := strconv.ParseInt(got.header.Get("webhook-timestamp"), 10, 64)
		if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
			t.Errorf("webhook-timestamp = %q: not the current unix time", got.header.Get("webhook-timestamp"))
		}
		if ct := got.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}

		// The body is exactly the documented message, fields in its order.
		keys := jsonKeys(t, got.body)
		if want := []string{"eventType", "bizData", "callbackUrl", "retryCount", "maxRetry", "createTime"}; strings.Join(keys, ",") != strings.Join(want, ",") {
			t.Errorf("body keys = %v, want %v", keys, want)
		}
		m := message(t, got.body)
		if m.EventType != "order.paid" || m.RetryCount != 0 || m.MaxRetry != 5 || m.CallbackURL != rcv.URL+"/hooks?token=partner-own-token" {
			t.Errorf("message = %+v", m)
		}
		if m.CreateTime != d.CreateTime.UnixMilli() {
			t.Errorf("createTime = %d, want %d", m.CreateTime, d.CreateTime.UnixMilli())
		}
		var biz map[string]any
		if err := json.Unmarshal([]byte(m.BizData), &biz); err != nil {
			t.Fatalf("bizData %q is not a JSON string: %v", m.BizData, err)
		}
		if biz["status"] != "PAID" || biz["amount"] != 99.9 || biz["pay_time"] == nil || biz["order_no"] == nil {
			t.Errorf("bizData = %v", biz)
		}
		if !strings.Contains(m.BizData, `"amount":99.90`) {
			t.Errorf("bizData amount is not rendered with two decimals: %s", m.BizData)
		}

		// The attempt is stored: request, response, duration.
		as := e.attempts(t, d.ID)
		if len(as) != 1 {
			t.Fatalf("%d attempts stored, want 1", len(as))
		}
		a := as[0]
		if a.AttemptNo != 1 || a.ResponseStatus == nil || *a.ResponseStatus != 200 || a.Error != "" {
			t.Errorf("attempt = no %d status %v error %q", a.AttemptNo, a.ResponseStatus, a.Error)
		}
		if a.RequestBody != string(got.body) {
			t.Errorf("stored request body %q, sent %q", a.RequestBody, got.body)
		}
		if a.ResponseBody != `{"n":1}` {
			t.Errorf("stored response body %q", a.ResponseBody)
		}
		var rh, qh map[string]string
		if err := json.Unmarshal([]byte(a.ResponseHeaders), &rh); err != nil || rh["X-Receiver"] != "test" {
			t.Errorf("stored response headers %s (%v)", a.ResponseHeaders, err)
		}
		if err := json.Unmarshal([]byte(a.RequestHeaders), &qh); err != nil || qh["Webhook-Id"] != d.EventID || qh["Webhook-Timestamp"] == "" {
			t.Errorf("stored request headers %s (%v)", a.RequestHeaders, err)
		}
		// Signatures are stored redacted, and never logged; neither is the
		// secret, nor the partner's token in the callback URL.
		if strings.Contains(a.RequestHeaders, sig[3:]) || qh["Webhook-Signature"] != "v1,[redacted]" {
			t.Errorf("stored request headers keep the signature: %s", a.RequestHeaders)
		}
		if a.DurationMs < 0 || a.StartedAt.IsZero() {
			t.Errorf("duration %d, started %s", a.DurationMs, a.StartedAt)
		}
		logs := e.logs.String()
		for _, s := range []string{sig[3:], whsec, strings.TrimPrefix(whsec, "whsec_"), "partner-own-token"} {
			if strings.Contains(logs, s) {
				t.Errorf("logs contain a secret, signature or callback token %q", s)
			}
		}
		if d.LeaseUntil != nil || d.RetryCount != 0 || d.LastError != "" {
			t.Errorf("delivery after success: lease %v, retry %d, error %q", d.LeaseUntil, d.RetryCount, d.LastError)
		}
	})
}

// Two failures then a 2xx: three attempts, SUCCESS, retryCount counting
// the failures before each attempt.
func TestFailTwiceThenSucceed(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, func(n int) int {
			if n <= 2 {
				return http.StatusInternalServerError
			}
			return http.StatusNoContent
		})
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: 20 * time.Millisecond})
		appID, _ := e.newApp(t, rcv.URL)
		d := e.pay(t, appID)
		d = e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		if d.RetryCount != 2 {
			t.Errorf("retry_count = %d, want 2", d.RetryCount)
		}
		reqs := rcv.requests()
		if len(reqs) != 3 {
			t.Fatalf("receiver got %d requests, want 3", len(reqs))
		}
		as := e.attempts(t, d.ID)
		if len(as) != 3 {
			t.Fatalf("%d attempts stored, want 3", len(as))
		}
		for i, want := range []int{500, 500, 204} {
			if m := message(t, reqs[i].body); m.RetryCount != i {
				t.Errorf("request %d: retryCount %d, want %d", i+1, m.RetryCount, i)
			}
			if reqs[i].header.Get("webhook-id") != d.EventID {
				t.Errorf("request %d: webhook-id changed between attempts", i+1)
			}
			if a := as[i]; a.AttemptNo != i+1 || a.ResponseStatus == nil || *a.ResponseStatus != want {
				t.Errorf("attempt %d: no %d status %v, want %d", i+1, a.AttemptNo, a.ResponseStatus, want)
			}
		}
		if as[0].Error != "" {
			t.Errorf("attempt 1 stored transport error %q for a 500 reply", as[0].Error)
		}
	})
}

// Always failing: exactly six attempts, separated by base×1, 2, 4, 8, 16,
// then FAILED with the alert (an ERROR log line and the metric).
//
// The service runs on a clock the test moves (the production base of 1 s):
// after each failed attempt the next one is due exactly 1, 2, 4, 8, 16 s
// later on that clock, nothing is attempted until the test moves the clock
// there (an early attempt would be stored at the earlier time), and the
// attempts' stored start times are exactly that far apart. Load on the
// machine can delay the steps but not change what is measured.
func TestAlwaysFailingEndsFailedWithAlert(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		const base = time.Second
		clock := newFakeClock()
		rcv := newReceiver(t, always(http.StatusServiceUnavailable))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: base, PollInterval: time.Hour, Now: clock.Now})
		appID, _ := e.newApp(t, rcv.URL)
		alerts := webhook.FailedTotal(order.EventPaid)
		d := e.pay(t, appID)

		for n := 1; n <= 5; n++ {
			// Attempt n failed: RETRYING with n retries counted, due base×2^(n-1) later.
			waitFor(t, 20*time.Second, func() bool {
				d = e.delivery(t, d.ID)
				return d.RetryCount == n && d.Status == dispatch.StatusRetrying && d.LeaseUntil == nil
			}, func() string {
				return fmt.Sprintf("after attempt %d: delivery %s, retry %d, lease %v", n, d.Status, d.RetryCount, d.LeaseUntil)
			})
			delay := base << (n - 1)
			if want := clock.Now().Add(delay); !d.NextAttemptAt.Equal(want) {
				t.Fatalf("after attempt %d: next attempt at %s, want %s (%s later)", n, d.NextAttemptAt, want, delay)
			}
			if as := e.attempts(t, d.ID); len(as) != n {
				t.Fatalf("after attempt %d: %d attempts stored before the retry was due", n, len(as))
			}
			clock.Advance(delay)
			e.svc.Notify()
		}
		d = e.waitStatus(t, d.ID, dispatch.StatusFailed, 20*time.Second)

		reqs := rcv.requests()
		if len(reqs) != 6 {
			t.Fatalf("receiver got %d requests, want exactly 6", len(reqs))
		}
		as := e.attempts(t, d.ID)
		if len(as) != 6 {
			t.Fatalf("%d attempts stored, want 6", len(as))
		}
		if d.RetryCount != 5 || d.LastError != "HTTP 503 Service Unavailable" || d.LeaseUntil != nil {
			t.Errorf("FAILED delivery: retry %d, error %q, lease %v", d.RetryCount, d.LastError, d.LeaseUntil)
		}
		var gaps []time.Duration
		for i := 1; i < len(as); i++ {
			gaps = append(gaps, as[i].StartedAt.Sub(as[i-1].StartedAt))
			if m := message(t, reqs[i].body); m.RetryCount != i {
				t.Errorf("attempt %d: retryCount %d, want %d", i+1, m.RetryCount, i)
			}
		}
		// Doubling, exactly: 1, 2, 4, 8, 16 s between the attempts' starts.
		for i, g := range gaps {
			if want := base << i; g != want {
				t.Errorf("gap %d = %s, want the retry delay %s (gaps %v)", i+1, g, want, gaps)
			}
		}
		// The alert follows the commit of FAILED: wait for it (briefly).
		waitFor(t, 5*time.Second, func() bool { return webhook.FailedTotal(order.EventPaid)-alerts >= 1 }, func() string {
			return fmt.Sprintf("alert counter rose by %v, want at least 1", webhook.FailedTotal(order.EventPaid)-alerts)
		})
		waitFor(t, 5*time.Second, func() bool {
			logs := e.logs.String()
			return strings.Contains(logs, "level=ERROR") && strings.Contains(logs, "ALERT webhook delivery FAILED") &&
				strings.Contains(logs, "delivery_id="+strconv.Itoa(d.ID))
		}, func() string {
			return fmt.Sprintf("no ERROR alert line for delivery %d in logs:\n%s", d.ID, e.logs.String())
		})
	})
}

// A transport failure is a failure like a non-2xx reply: the error is
// stored, there is no response.
func TestTransportFailureIsStored(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		dead := newReceiver(t, always(200))
		url := dead.URL
		dead.Close() // nothing listens there any more
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Hour})
		appID, _ := e.newApp(t, url)
		d := e.pay(t, appID)
		d = e.waitStatus(t, d.ID, dispatch.StatusRetrying, 10*time.Second)
		as := e.attempts(t, d.ID)
		if len(as) != 1 || as[0].ResponseStatus != nil || !strings.Contains(as[0].Error, "refused") {
			t.Fatalf("attempts = %+v", as)
		}
		if d.RetryCount != 1 || time.Until(d.NextAttemptAt) < 59*time.Minute {
			t.Errorf("retry %d next %s: want retry 1 in about an hour", d.RetryCount, d.NextAttemptAt)
		}
	})
}

// Reply bodies are stored up to 64 KiB, made storable (NUL, bad UTF-8).
func TestResponseBodyTruncatedAndSanitised(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		big := append([]byte("\x00\xff"), bytes.Repeat([]byte("a"), 100<<10)...)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(big)
		}))
		t.Cleanup(srv.Close)
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		appID, _ := e.newApp(t, srv.URL)
		d := e.pay(t, appID)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		a := e.attempts(t, d.ID)[0]
		if !strings.HasPrefix(a.ResponseBody, "\uFFFD\uFFFDaaa") {
			t.Errorf("stored body starts %q", a.ResponseBody[:10])
		}
		if n := strings.Count(a.ResponseBody, "a"); n != sender.MaxStoredResponseBody-2 {
			t.Errorf("stored %d bytes of the body, want the first 64 KiB", n+2)
		}
	})
}

// A callback on a private address is refused unless allowed: at
// registration, and at dial time for URLs that got in anyway (registered
// while allowed, or a name resolving to a private address).
func TestPrivateCallbackRefusedByDefault(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(200))
		e := newEnv(t, b, webhook.Options{AllowPrivate: false, RetryBase: time.Hour})
		ctx := context.Background()

		_, _, err := e.partners.Create(ctx, partner.CreateInput{AppName: "evil", CallbackURL: rcv.URL})
		if errs.KindOf(err) != errs.Validation || errs.Field(err) != "callbackURL" {
			t.Fatalf("registering %s: %v, want a callbackURL validation error", rcv.URL, err)
		}

		port := rcv.URL[strings.LastIndexByte(rcv.URL, ':'):]
		for _, url := range []string{rcv.URL + "/ip-literal", "http://localhost" + port + "/name"} {
			appID, _ := e.newApp(t, "https://partner.example.com/cb")
			// Bypass registration, as a URL stored while private addresses
			// were allowed would.
			if err := e.db.PartnerApp.Update().Where(partnerapp.ID(appID)).SetCallbackURL(url).Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if err := webhook.SyncFirstEndpoint(ctx, e.db.Client, appID); err != nil { // its endpoint follows
				t.Fatal(err)
			}
			d := e.pay(t, appID)
			d = e.waitStatus(t, d.ID, dispatch.StatusRetrying, 10*time.Second)
			as := e.attempts(t, d.ID)
			if len(as) != 1 || !strings.Contains(as[0].Error, "forbidden callback address") || as[0].ResponseStatus != nil {
				t.Errorf("%s: attempts %+v, want one refused by the SSRF guard", url, as)
			}
		}
		if n := rcv.count(); n != 0 {
			t.Errorf("the private receiver got %d requests", n)
		}
	})
}

// During a webhook secret rotation both secrets sign; after the overlap
// only the new one.
func TestRotationOverlapSignsWithBothSecrets(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(200))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		appID, oldSecret := e.newApp(t, rcv.URL)
		_, newSecret, err := e.partners.RotateWebhookSecret(ctx, appID)
		if err != nil {
			t.Fatal(err)
		}
		verify := func(secret string, r received) error {
			wh, err := standardwebhooks.NewWebhook(secret)
			if err != nil {
				t.Fatal(err)
			}
			return wh.Verify(r.body, r.header)
		}

		d := e.pay(t, appID)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		r := rcv.requests()[0]
		if sig := r.header.Get("webhook-signature"); len(strings.Split(sig, " ")) != 2 || r.header.Get("X-Webhook-Signature") != sig {
			t.Fatalf("during the overlap: signature %q, want two", sig)
		}
		if err := verify(oldSecret, r); err != nil {
			t.Errorf("old secret during the overlap: %v", err)
		}
		if err := verify(newSecret, r); err != nil {
			t.Errorf("new secret during the overlap: %v", err)
		}

		// The overlap ends.
		if err := e.db.PartnerApp.UpdateOneID(appID).SetPreviousWebhookSecretExpiresAt(time.Now().Add(-time.Second)).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if err := webhook.SyncFirstEndpointSecret(ctx, e.db.Client, appID); err != nil { // its endpoint's too
			t.Fatal(err)
		}
		d = e.pay(t, appID)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		r = rcv.requests()[1]
		if sig := r.header.Get("webhook-signature"); strings.Contains(sig, " ") {
			t.Errorf("after the overlap: signature %q, want one", sig)
		}
		if err := verify(newSecret, r); err != nil {
			t.Errorf("new secret after the overlap: %v", err)
		}
		if err := verify(oldSecret, r); err == nil {
			t.Error("old secret still verifies after the overlap")
		}
	})
}

// jsonKeys returns the top-level keys of a JSON object in order.
func jsonKeys(t *testing.T, body []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	var keys []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("body %s is not an object", body)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}
