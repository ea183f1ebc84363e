package partnerapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
)

// TestPartnerChecks walks the documented checks in order: each case breaks
// one rule (or several, to show which check wins).
func TestPartnerChecks(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{AppKey: "checks-app"})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "SO1001", Amount: "99.90"})
		off, offSec := createApp(t, e, partner.CreateInput{AppKey: "off-app"})
		disabled := partner.Disabled
		if _, err := e.App.Partners.Update(context.Background(), off.ID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		yesterday := time.Now().UTC().AddDate(0, 0, -1)
		today := time.Now().UTC()
		_, expiredSec := createApp(t, e, partner.CreateInput{AppKey: "expired-app", ExpireDate: &yesterday})
		todayApp, todaySec := createApp(t, e, partner.CreateInput{AppKey: "today-app", ExpireDate: &today})
		createOrder(t, e, order.CreateInput{AppID: todayApp.ID, OrderNo: "SO-TODAY", Amount: "1"})

		biz := []pair{{"order_no", "SO1001"}}
		ms := func(d time.Duration) string { return strconv.FormatInt(time.Now().Add(d).UnixMilli(), 10) }
		// build signs correctly unless told otherwise; with, without and
		// replace adjust the parameters after signing.
		type q = []pair
		signedWith := func(key, secret, ts, nonce string, params q) q {
			return append(append(q{{"app_key", key}, {"timestamp", ts}, {"nonce", nonce}}, params...), pair{"sign", md5Sign(secret, ts, nonce, params)})
		}
		without := func(p q, name string) q {
			var out q
			for _, x := range p {
				if x.name != name {
					out = append(out, x)
				}
			}
			return out
		}
		replace := func(p q, name, value string) q {
			out := append(q(nil), p...)
			for i := range out {
				if out[i].name == name {
					out[i].value = value
				}
			}
			return out
		}
		long := strings.Repeat("n", 64)
		uni := strings.Repeat("é", 64) // 64 characters, 128 bytes
		cases := []struct {
			name   string
			query  func() q
			status int
			code   int
			msg    string
		}{
			{"valid", func() q { return signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz) }, 200, 200, "success"},
			{"app_key missing", func() q { return without(signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz), "app_key") }, 401, 4001, "invalid app key"},
			{"app_key empty", func() q { return replace(signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz), "app_key", "") }, 401, 4001, "invalid app key"},
			{"app_key unknown", func() q { return signedWith("nobody", sec, nowMillis(), freshNonce(), biz) }, 401, 4001, "invalid app key: unknown app_key"},
			{"app_key too long", func() q { return signedWith(strings.Repeat("k", 65), sec, nowMillis(), freshNonce(), biz) }, 401, 4001, "invalid app key"},
			{"app disabled", func() q { return signedWith(off.AppKey, offSec, nowMillis(), freshNonce(), biz) }, 401, 4001, "invalid app key: app is disabled"},
			{"app expired yesterday", func() q { return signedWith("expired-app", expiredSec, nowMillis(), freshNonce(), biz) }, 401, 4001, "invalid app key: app authorization expired"},
			{"app expiring today still works", func() q {
				return signedWith("today-app", todaySec, nowMillis(), freshNonce(), q{{"order_no", "SO-TODAY"}})
			}, 200, 200, "success"},
			{"timestamp missing", func() q { return without(signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz), "timestamp") }, 401, 4003, "request expired"},
			{"timestamp not an integer", func() q { return signedWith(app.AppKey, sec, "soon", freshNonce(), biz) }, 401, 4003, "request expired"},
			{"timestamp fractional", func() q { return signedWith(app.AppKey, sec, nowMillis()+".5", freshNonce(), biz) }, 401, 4003, "request expired"},
			{"timestamp signed", func() q { return signedWith(app.AppKey, sec, "+"+nowMillis(), freshNonce(), biz) }, 401, 4003, "request expired"},
			{"timestamp in seconds", func() q {
				return signedWith(app.AppKey, sec, strconv.FormatInt(time.Now().Unix(), 10), freshNonce(), biz)
			}, 401, 4003, "request expired"},
			{"timestamp 6 minutes old", func() q { return signedWith(app.AppKey, sec, ms(-6*time.Minute), freshNonce(), biz) }, 401, 4003, "request expired"},
			{"timestamp 6 minutes ahead", func() q { return signedWith(app.AppKey, sec, ms(6*time.Minute), freshNonce(), biz) }, 401, 4003, "request expired"},
			// Four minutes old, or as old as the replay memory allows: a fresh
			// Redis prefix started it when this test's server started.
			{"timestamp 4 minutes old", func() q {
				ts := time.Now().Add(-4 * time.Minute)
				if start := e.App.Admission.ReplayStart().Add(time.Millisecond); ts.Before(start) {
					ts = start
				}
				return signedWith(app.AppKey, sec, strconv.FormatInt(ts.UnixMilli(), 10), freshNonce(), biz)
			}, 200, 200, "success"},
			{"timestamp 4 minutes ahead", func() q { return signedWith(app.AppKey, sec, ms(4*time.Minute), freshNonce(), biz) }, 200, 200, "success"},
			{"nonce missing", func() q { return without(signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz), "nonce") }, 401, 4002, "signature verification failed: nonce is missing"},
			{"nonce empty", func() q { return signedWith(app.AppKey, sec, nowMillis(), "", biz) }, 401, 4002, "signature verification failed: nonce is missing"},
			{"nonce of 65 characters", func() q { return signedWith(app.AppKey, sec, nowMillis(), long+"x", biz) }, 401, 4002, "signature verification failed: nonce must be at most 64"},
			{"nonce of 64 characters", func() q { return signedWith(app.AppKey, sec, nowMillis(), long[:54]+freshNonce()[:10], biz) }, 200, 200, "success"},
			{"nonce of 64 non-ASCII characters", func() q { return signedWith(app.AppKey, sec, nowMillis(), uni, biz) }, 200, 200, "success"},
			{"sign missing", func() q { return without(signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz), "sign") }, 401, 4002, "signature verification failed: sign is missing"},
			{"sign wrong", func() q {
				return replace(signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz), "sign", strings.Repeat("0", 32))
			}, 401, 4002, "signature verification failed: sign must be the lower-case hex MD5 of: <secret>"},
			{"sign with another secret", func() q { return signedWith(app.AppKey, offSec, nowMillis(), freshNonce(), biz) }, 401, 4002, "signature verification failed"},
			{"sign over other parameters", func() q {
				p := signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz)
				return replace(p, "order_no", "SO1002")
			}, 401, 4002, "signature verification failed"},
			{"sign in upper case", func() q {
				p := signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz)
				return replace(p, "sign", strings.ToUpper(p[len(p)-1].value))
			}, 200, 200, "success"},
			{"business parameter twice", func() q {
				ts, n := nowMillis(), freshNonce()
				return append(signedWith(app.AppKey, sec, ts, n, biz), pair{"order_no", "SO1001"})
			}, 401, 4002, `signature verification failed: parameter "order_no" is given more than once`},
			{"sign twice", func() q {
				p := signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz)
				return append(p, p[len(p)-1])
			}, 401, 4002, `signature verification failed: parameter "sign" is given more than once`},
			{"unknown sign_type", func() q {
				ts, n := nowMillis(), freshNonce()
				return signedWith(app.AppKey, sec, ts, n, append(q{{"sign_type", "SHA1"}}, biz...))
			}, 401, 4002, "signature verification failed: sign_type must be MD5 or HMAC-SHA256"},
			{"explicit sign_type=MD5", func() q {
				return signedWith(app.AppKey, sec, nowMillis(), freshNonce(), append(q{{"sign_type", "MD5"}}, biz...))
			}, 200, 200, "success"},
			// Several faults: the first check in the documented order wins.
			{"unknown app and old timestamp", func() q { return signedWith("nobody", sec, ms(-time.Hour), freshNonce(), biz) }, 401, 4001, "invalid app key"},
			{"old timestamp and no nonce", func() q {
				return without(signedWith(app.AppKey, sec, ms(-time.Hour), freshNonce(), biz), "nonce")
			}, 401, 4003, "request expired"},
			{"no nonce and wrong sign", func() q {
				return replace(without(signedWith(app.AppKey, sec, nowMillis(), freshNonce(), biz), "nonce"), "sign", "00")
			}, 401, 4002, "signature verification failed: nonce is missing"},
			{"disabled app and wrong sign", func() q { return signedWith(off.AppKey, "wrong", nowMillis(), freshNonce(), biz) }, 401, 4001, "invalid app key"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				call(t, e, "GET", orderURL(e, "v1")+rawQuery(c.query())).expect(t, c.status, c.code, c.msg)
			})
		}
	})
}

// TestPartnerWrongSignShowsSignedString: the 4002 names exactly the string
// that was signed, with the secret written as <secret>, and never the secret.
func TestPartnerWrongSignShowsSignedString(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{})
		ts, n := nowMillis(), freshNonce()
		params := []pair{{"page_size", "10"}, {"order_no", "SO 1&2=3"}, {"page", "1"}}
		all := append([]pair{{"nonce", n}, {"app_key", app.AppKey}}, params...)
		all = append(all, pair{"timestamp", ts}, pair{"sign", "0123"})
		r := call(t, e, "GET", orderURL(e, "v1")+rawQuery(all)).expect(t, 401, 4002, "signature verification failed")
		want := "<secret>" + ts + n + "order_noSO 1&2=3page1page_size10"
		if !strings.HasSuffix(r.Message, want) {
			t.Fatalf("message %q does not end with the signed string %q", r.Message, want)
		}
		if strings.Contains(string(r.body), sec) {
			t.Fatal("the reply holds the secret")
		}
		if strings.Contains(string(r.body), `\u003c`) {
			t.Fatalf("<secret> is HTML-escaped: %s", r.body)
		}
		// The same request signed as shown verifies.
		good := append(all[:len(all)-1], pair{"sign", md5Sign(sec, ts, n, params)})
		call(t, e, "GET", orderURL(e, "v1")+rawQuery(good)).expect(t, 404, 5001, "order does not exist")
		// Nothing of the request but the path reaches the log.
		if logs := e.Logs.String(); strings.Contains(logs, n) || strings.Contains(logs, sec) || strings.Contains(logs, "0123") {
			t.Fatalf("log holds request parameters:\n%s", logs)
		}
	})
}

// TestPartnerHMAC: sign_type=HMAC-SHA256 is a signed parameter that selects
// HMAC-SHA256 keyed by the secret over the string without the secret.
func TestPartnerHMAC(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "H1", Amount: "5.00"})
		send := func(signType, sign string, ts, n string) envelope {
			params := []pair{{"order_no", "H1"}, {"sign_type", signType}}
			all := append([]pair{{"app_key", app.AppKey}, {"timestamp", ts}, {"nonce", n}}, params...)
			if sign == "" {
				sign = hmacSign(sec, ts, n, params)
			}
			return call(t, e, "GET", orderURL(e, "v2")+rawQuery(append(all, pair{"sign", sign})))
		}
		send("HMAC-SHA256", "", nowMillis(), freshNonce()).expect(t, 200, 200, "success")
		send("hmac-sha256", "", nowMillis(), freshNonce()).expect(t, 200, 200, "success")
		// An MD5 signature under sign_type=HMAC-SHA256 fails, and the
		// explanation names HMAC without a leading secret.
		ts, n := nowMillis(), freshNonce()
		r := send("HMAC-SHA256", md5Sign(sec, ts, n, []pair{{"order_no", "H1"}, {"sign_type", "HMAC-SHA256"}}), ts, n).
			expect(t, 401, 4002, "signature verification failed: sign must be the lower-case hex HMAC-SHA256, keyed by <secret>, of: "+ts+n+"order_noH1sign_typeHMAC-SHA256")
		_ = r
		// Dropping sign_type after signing breaks the signature.
		ts, n = nowMillis(), freshNonce()
		sign := hmacSign(sec, ts, n, []pair{{"order_no", "H1"}, {"sign_type", "HMAC-SHA256"}})
		call(t, e, "GET", orderURL(e, "v2")+rawQuery([]pair{{"app_key", app.AppKey}, {"timestamp", ts}, {"nonce", n}, {"order_no", "H1"}, {"sign", sign}})).
			expect(t, 401, 4002, "signature verification failed")
		// The SDK signs with HMAC when asked.
		c := client(e, app.AppKey, sec)
		c.SignType = "HMAC-SHA256"
		if o, err := c.OrderV1(context.Background(), "H1"); err != nil || o.Amount != "5.00" {
			t.Fatalf("SDK with HMAC: %+v %v", o, err)
		}
	})
}

// TestPartnerFailedSignatureKeepsNonce: a nonce is recorded only once the
// signature verified, so a request refused for its signature can be sent
// again, correctly signed, with the same nonce; a repeat of a verified
// nonce is 4004 even with a wrong signature (the nonce check comes first).
func TestPartnerFailedSignatureKeepsNonce(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{})
		ts, n := nowMillis(), freshNonce()
		biz := []pair{{"order_no", "X"}}
		bad := rawQuery([]pair{{"app_key", app.AppKey}, {"timestamp", ts}, {"nonce", n}, {"order_no", "X"}, {"sign", "bad"}})
		call(t, e, "GET", orderURL(e, "v1")+bad).expect(t, 401, 4002, "signature verification failed")
		good := signedQuery(app.AppKey, sec, ts, n, biz...)
		call(t, e, "GET", orderURL(e, "v1")+good).expect(t, 404, 5001, "order does not exist")
		call(t, e, "GET", orderURL(e, "v1")+good).expect(t, 401, 4004, "duplicate request")
		call(t, e, "GET", orderURL(e, "v1")+bad).expect(t, 401, 4004, "duplicate request")
		// Nonces are per app: another app may use the same one.
		other, otherSec := createApp(t, e, partner.CreateInput{})
		call(t, e, "GET", orderURL(e, "v1")+signedQuery(other.AppKey, otherSec, ts, n, biz...)).expect(t, 404, 5001, "order does not exist")
	})
}

func TestPartnerMalformedQuery(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{})
		ts, n := nowMillis(), freshNonce()
		q := signedQuery(app.AppKey, sec, ts, n, pair{"order_no", "X"}) + "&bad%zz=1"
		call(t, e, "GET", orderURL(e, "v1")+q).expect(t, 401, 4002, "signature verification failed: the query string is not valid URL encoding")
		// A malformed app_key reads as missing.
		call(t, e, "GET", orderURL(e, "v1")+"app_key=%zz&timestamp="+ts).expect(t, 401, 4001, "invalid app key")
		if !utf8.ValidString(q) {
			t.Fatal("unreachable")
		}
	})
}

func TestPartnerStatusHeaderOnRejections(t *testing.T) {
	e := apptest.Start(t, testenv.Backend{Name: "sqlite"})
	r := call(t, e, "GET", orderURL(e, "v2")+"app_key=nobody")
	r.expect(t, http.StatusUnauthorized, 4001, "invalid app key")
	if r.header.Get("API-Version") != "v2" {
		t.Fatalf("API-Version = %q on a rejection", r.header.Get("API-Version"))
	}
}
