package partnerapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// envelope is the decoded partner reply plus its raw keys.
type envelope struct {
	Code      int             `json:"code"`
	Message   string          `json:"message"`
	Data      json.RawMessage `json:"data"`
	Timestamp int64           `json:"timestamp"`
	RequestID string          `json:"request_id"`
	keys      map[string]json.RawMessage
	status    int
	header    http.Header
	body      []byte
}

func decodeEnvelope(t testing.TB, status int, header http.Header, body []byte) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("HTTP %d: body is not an envelope: %v\n%s", status, err, body)
	}
	if err := json.Unmarshal(body, &e.keys); err != nil {
		t.Fatal(err)
	}
	e.status, e.header, e.body = status, header, body
	return e
}

// get sends GET rawURL; it is safe in any goroutine (no t.Fatal).
func get(c *http.Client, method, rawURL string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

func call(t testing.TB, e *apptest.Env, method, rawURL string) envelope {
	t.Helper()
	status, h, b, err := get(e.Client, method, rawURL)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	return decodeEnvelope(t, status, h, b)
}

// expect fails unless the reply has that HTTP status, code and a message
// starting with msgPrefix.
func (e envelope) expect(t testing.TB, status, code int, msgPrefix string) envelope {
	t.Helper()
	if e.status != status || e.Code != code || !strings.HasPrefix(e.Message, msgPrefix) {
		t.Fatalf("got HTTP %d code %d %q; want HTTP %d code %d message starting %q\n%s", e.status, e.Code, e.Message, status, code, msgPrefix, e.body)
	}
	if code != 200 {
		if _, ok := e.keys["data"]; ok {
			t.Fatalf("error reply carries data: %s", e.body)
		}
	}
	return e
}

// sharedKeyOption gives several instances one master key, as replicas have.
func sharedKeyOption() apptest.Option {
	key := base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
	return func(c *config.Config) { c.Auth.MasterKeyB64 = key }
}

// createApp creates an app through the service, the way the admin does.
func createApp(t testing.TB, e *apptest.Env, in partner.CreateInput) (partner.App, string) {
	t.Helper()
	return apptest.CreateApp(t, e, in)
}

func createOrder(t testing.TB, e *apptest.Env, in order.CreateInput) order.Order {
	t.Helper()
	o, err := e.App.Orders.Create(context.Background(), in)
	if err != nil {
		t.Fatalf("create order: %v", err)
	}
	return o
}

var nonceSeq atomic.Int64

func freshNonce() string {
	return "n" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(nonceSeq.Add(1), 10)
}

func nowMillis() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }

// pair is one query parameter, sent in the order given.
type pair struct{ name, value string }

// rawQuery encodes pairs in order, form-encoding names and values.
func rawQuery(pairs []pair) string {
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = url.QueryEscape(p.name) + "=" + url.QueryEscape(p.value)
	}
	return strings.Join(parts, "&")
}

// canonicalOf is an independent implementation of the signed string.
func canonicalOf(ts, nonce string, params []pair) string {
	ps := append([]pair(nil), params...)
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	var b strings.Builder
	b.WriteString(ts + nonce)
	for _, p := range ps {
		b.WriteString(p.name + p.value)
	}
	return b.String()
}

func md5Sign(secret, ts, nonce string, params []pair) string {
	sum := md5.Sum([]byte(secret + canonicalOf(ts, nonce, params)))
	return hex.EncodeToString(sum[:])
}

func hmacSign(secret, ts, nonce string, params []pair) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(canonicalOf(ts, nonce, params)))
	return hex.EncodeToString(m.Sum(nil))
}

// signedQuery returns the query of a correctly signed request.
func signedQuery(appKey, secret, ts, nonce string, params ...pair) string {
	all := append([]pair{{"app_key", appKey}, {"timestamp", ts}, {"nonce", nonce}}, params...)
	all = append(all, pair{"sign", md5Sign(secret, ts, nonce, params)})
	return rawQuery(all)
}

// client returns the SDK client for an app of e.
func client(e *apptest.Env, appKey, secret string) *partnerclient.Client {
	c := partnerclient.New(e.PublicURL, appKey, secret)
	c.HTTPClient = e.Client
	return c
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func orderURL(e *apptest.Env, version string) string {
	return e.PublicURL + "/api/" + version + "/orders/query?"
}

// startPair starts two instances sharing backend b (Postgres + Redis): two
// replicas behind a load balancer.
func startPair(t *testing.T, b testenv.Backend) (*apptest.Env, *apptest.Env) {
	t.Helper()
	opt := sharedKeyOption()
	return apptest.Start(t, b, opt), apptest.Start(t, b, opt)
}
