package partnerapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/ent/apiusage"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerapi"
	"gatehouse/rest/partnerclient"
)

func TestPartnerEnvelope(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "E1", Amount: "3.10"})
		check := func(r envelope, wantKeys ...string) {
			t.Helper()
			if len(r.keys) != len(wantKeys) {
				t.Fatalf("envelope keys %v, want %v", r.keys, wantKeys)
			}
			for _, k := range wantKeys {
				if _, ok := r.keys[k]; !ok {
					t.Fatalf("envelope lacks %q: %s", k, r.body)
				}
			}
			if now := time.Now().UnixMilli(); r.Timestamp < now-5000 || r.Timestamp > now+1000 {
				t.Fatalf("timestamp %d is not the reply time in ms (now %d)", r.Timestamp, now)
			}
			if r.RequestID == "" || r.RequestID != r.header.Get("X-Request-Id") {
				t.Fatalf("request_id %q, X-Request-Id %q", r.RequestID, r.header.Get("X-Request-Id"))
			}
			if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Fatalf("Content-Type %q", r.header.Get("Content-Type"))
			}
		}
		ok := call(t, e, "GET", orderURL(e, "v1")+signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "E1"})).expect(t, 200, 200, "success")
		if ok.Message != "success" {
			t.Fatalf("message %q", ok.Message)
		}
		check(ok, "code", "message", "data", "timestamp", "request_id")
		bad := call(t, e, "GET", orderURL(e, "v1")+"app_key=nope").expect(t, 401, 4001, "invalid app key")
		check(bad, "code", "message", "timestamp", "request_id")
		// The caller's request id is the envelope's.
		r := e.Do(t, "GET", orderURL(e, "v1")+"app_key=nope", "", "X-Request-Id", "trace-42")
		if env := decodeEnvelope(t, r.Status, r.Header, r.Body); env.RequestID != "trace-42" {
			t.Fatalf("request_id %q, want the caller's trace-42", env.RequestID)
		}
	})
}

func TestOrderQuery(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{})
		other, _ := createApp(t, e, partner.CreateInput{})
		paidAt := time.Date(2026, 11, 22, 10, 0, 5, 123456789, time.UTC)
		createdAt := func() time.Time { return time.Date(2026, 11, 22, 9, 59, 0, 987654321, time.UTC) }
		e.App.Orders.SetClock(createdAt)
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "SO1001", Amount: "99.90",
			CustomerName: "Alice Chen", CustomerPhone: "13800000000", CustomerEmail: "alice@example.com"})
		e.App.Orders.SetClock(func() time.Time { return paidAt })
		if _, err := e.App.Orders.Pay(context.Background(), "SO1001"); err != nil {
			t.Fatal(err)
		}
		e.App.Orders.SetClock(createdAt)
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "SO1002", Amount: "7"})
		createOrder(t, e, order.CreateInput{AppID: other.ID, OrderNo: "SO9999", Amount: "1.00"})
		q := func(version string, params ...pair) envelope {
			return call(t, e, "GET", orderURL(e, version)+signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), params...))
		}

		v1 := q("v1", pair{"order_no", "SO1001"}).expect(t, 200, 200, "success")
		if !strings.Contains(string(v1.body), `"data":{"order_no":"SO1001","amount":99.90,"status":"PAID"}`) {
			t.Fatalf("v1 data: %s", v1.body)
		}
		if v1.header.Get("API-Version") != "v1" {
			t.Fatalf("API-Version %q", v1.header.Get("API-Version"))
		}
		v2 := q("v2", pair{"order_no", "SO1001"}).expect(t, 200, 200, "success")
		var d2 map[string]json.RawMessage
		if err := json.Unmarshal(v2.Data, &d2); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"order_no":      `"SO1001"`,
			"amount":        `99.90`,
			"status":        `"PAID"`,
			"create_time":   `"2026-11-22T09:59:00.987Z"`,
			"pay_time":      `"2026-11-22T10:00:05.123Z"`,
			"customer_info": `{"name":"Alice Chen","phone":"138****0000","email":"a***@example.com"}`,
		}
		if len(d2) != len(want) {
			t.Fatalf("v2 data fields %s", v2.Data)
		}
		for k, v := range want {
			if string(d2[k]) != v {
				t.Fatalf("v2 %s = %s, want %s", k, d2[k], v)
			}
		}
		if v2.header.Get("API-Version") != "v2" {
			t.Fatalf("API-Version %q", v2.header.Get("API-Version"))
		}
		created := q("v2", pair{"order_no", "SO1002"}).expect(t, 200, 200, "success")
		if !strings.Contains(string(created.Data), `"amount":7.00`) || !strings.Contains(string(created.Data), `"pay_time":null`) || !strings.Contains(string(created.Data), `"status":"CREATED"`) {
			t.Fatalf("unpaid order: %s", created.Data)
		}

		q("v1", pair{"order_no", "NOPE"}).expect(t, 404, 5001, "order does not exist")
		q("v2", pair{"order_no", "SO9999"}).expect(t, 403, 5003, "no access to the resource")

		for _, c := range []struct {
			name   string
			params []pair
			ok     bool
		}{
			{"order_no missing", nil, false},
			{"order_no empty", []pair{{"order_no", ""}}, false},
			{"order_no 65 characters", []pair{{"order_no", strings.Repeat("A", 65)}}, false},
			{"order_no 64 characters", []pair{{"order_no", strings.Repeat("A", 64)}}, true},
			{"page 0", []pair{{"order_no", "SO1001"}, {"page", "0"}}, false},
			{"page negative", []pair{{"order_no", "SO1001"}, {"page", "-1"}}, false},
			{"page not a number", []pair{{"order_no", "SO1001"}, {"page", "one"}}, false},
			{"page empty", []pair{{"order_no", "SO1001"}, {"page", ""}}, false},
			{"page 1", []pair{{"order_no", "SO1001"}, {"page", "1"}}, true},
			{"page 99999", []pair{{"order_no", "SO1001"}, {"page", "99999"}}, true},
			{"page huge", []pair{{"order_no", "SO1001"}, {"page", "99999999999999999999"}}, false},
			{"page_size 0", []pair{{"order_no", "SO1001"}, {"page_size", "0"}}, false},
			{"page_size 101", []pair{{"order_no", "SO1001"}, {"page_size", "101"}}, false},
			{"page_size 1.5", []pair{{"order_no", "SO1001"}, {"page_size", "1.5"}}, false},
			{"page_size 1", []pair{{"order_no", "SO1001"}, {"page_size", "1"}}, true},
			{"page_size 100", []pair{{"order_no", "SO1001"}, {"page_size", "100"}, {"page", "2"}}, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := q("v1", c.params...)
				switch {
				case c.ok && r.Code == 200, c.ok && r.Code == 5001:
				case !c.ok:
					r.expect(t, 400, 5002, "parameter validation failed")
				default:
					t.Fatalf("got %d %s", r.Code, r.body)
				}
			})
		}

		// The SDK reads both shapes.
		c := client(e, app.AppKey, sec)
		o2, err := c.OrderV2(context.Background(), "SO1001", partnerclient.QueryParams{Page: 1, PageSize: 20})
		if err != nil || o2.Amount != "99.90" || o2.PayTime == nil || !o2.PayTime.Equal(paidAt.Truncate(time.Millisecond)) || o2.CustomerInfo.Phone != "138****0000" {
			t.Fatalf("SDK v2: %+v %v", o2, err)
		}
		_, err = c.OrderV1(context.Background(), "SO9999")
		var apiErr *partnerclient.APIError
		if !asAPIError(err, &apiErr) || apiErr.Code != 5003 || apiErr.HTTPStatus != 403 {
			t.Fatalf("SDK other app's order: %v", err)
		}
	})
}

func asAPIError(err error, target **partnerclient.APIError) bool {
	e, ok := err.(*partnerclient.APIError)
	if ok {
		*target = e
	}
	return ok
}

func TestPartnerRouting(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{})
		n := freshNonce()
		signed := signedQuery(app.AppKey, sec, nowMillis(), n, pair{"order_no", "x"})
		type route struct {
			method, path string
			status       int
			version      string
		}
		var cases []route
		methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH"}
		for _, v := range partnerapi.PartnerAPI {
			cases = append(cases,
				route{"GET", "/api/" + v.Name + "/nope", 404, v.Name},
				route{"GET", "/api/" + v.Name + "/orders", 404, v.Name},
				route{"GET", "/api/" + v.Name, 404, v.Name},
				route{"GET", "/api/" + v.Name + "/", 404, v.Name},
			)
			byPath := map[string][]string{}
			for _, ep := range v.Endpoints {
				byPath[ep.Path] = append(byPath[ep.Path], ep.Method)
			}
			for path, served := range byPath {
				slices.Sort(served)
				concrete := strings.ReplaceAll(path, "{id}", "1")
				cases = append(cases, route{served[0], "/api/" + v.Name + concrete + "/", 404, v.Name})
				// Every other method: 405 with Allow naming the path's.
				for _, m := range methods {
					if !slices.Contains(served, m) {
						r := call(t, e, m, e.PublicURL+"/api/"+v.Name+concrete+"?"+signed)
						r.expect(t, 405, 5002, "parameter validation failed")
						if r.header.Get("Allow") != strings.Join(served, ", ") || r.header.Get("API-Version") != v.Name {
							t.Fatalf("%s %s: Allow %q, API-Version %q", m, path, r.header.Get("Allow"), r.header.Get("API-Version"))
						}
					}
				}
			}
		}
		next := "v" + strconv.Itoa(len(partnerapi.PartnerAPI)+1)
		cases = append(cases, route{"GET", "/api/" + next + "/orders/query", 404, ""}, route{"GET", "/api/v0/orders/query", 404, ""})
		for _, c := range cases {
			r := call(t, e, c.method, e.PublicURL+c.path+"?"+signed)
			r.expect(t, c.status, 5002, "parameter validation failed")
			if r.header.Get("API-Version") != c.version {
				t.Fatalf("%s: API-Version %q, want %q", c.path, r.header.Get("API-Version"), c.version)
			}
		}
		// Routing comes first: none of the above consumed the nonce.
		call(t, e, "GET", orderURL(e, "v1")+signed).expect(t, 404, 5001, "order does not exist")
		// Outside /api/v{n}/ the generic error shape stays.
		for _, path := range []string{"/api/vX/orders", "/api/", "/api/nope"} {
			if r := e.Do(t, "GET", e.PublicURL+path, ""); r.Status != 404 || r.Map(t)["error"] != "not_found" {
				t.Fatalf("%s: %d %s", path, r.Status, r.Body)
			}
		}
	})
}

func TestPartnerVersionLifecycle(t *testing.T) {
	// Deprecated a month ago, retiring in a year (dates relative to now so
	// that the test does not retire v1 itself one day).
	deprecated := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, -1, 0)
	sunset := time.Now().UTC().Truncate(24*time.Hour).AddDate(1, 0, 0).Add(12 * time.Hour)
	e := apptest.Start(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) {
		c.API.Deprecated = "v1=" + deprecated.Format(time.DateOnly)
		c.API.Sunset = "v1=" + sunset.Format(time.RFC3339)
	})
	app, sec := createApp(t, e, partner.CreateInput{})
	r1 := call(t, e, "GET", orderURL(e, "v1")+signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "x"}))
	if got := r1.header.Get("Deprecation"); got != "@"+strconv.FormatInt(deprecated.Unix(), 10) {
		t.Fatalf("Deprecation %q", got)
	}
	if got := r1.header.Get("Sunset"); got != sunset.Format(http.TimeFormat) || !strings.HasSuffix(got, " 12:00:00 GMT") {
		t.Fatalf("Sunset %q", got)
	}
	// Also on rejections and on unknown paths of that version.
	if r := call(t, e, "GET", e.PublicURL+"/api/v1/nope"); r.header.Get("Deprecation") == "" || r.header.Get("API-Version") != "v1" {
		t.Fatalf("unknown v1 path headers: %v", r.header)
	}
	r2 := call(t, e, "GET", orderURL(e, "v2")+signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "x"}))
	if r2.header.Get("Deprecation") != "" || r2.header.Get("Sunset") != "" || r2.header.Get("API-Version") != "v2" {
		t.Fatalf("v2 headers: %v", r2.header)
	}
}

// TestPartnerVersionRetired: after its sunset a version answers every
// path with 410/5002 before the signature is checked (no nonce used, no
// call counted); the other versions are unaffected.
func TestPartnerVersionRetired(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		today := time.Now().UTC().Truncate(24 * time.Hour)
		sunset := today.AddDate(0, 0, -1)
		e := apptest.Start(t, b, func(c *config.Config) {
			c.API.Deprecated = "v1=" + sunset.AddDate(0, 0, -200).Format(time.DateOnly)
			c.API.Sunset = "v1=" + sunset.Format(time.DateOnly)
		})
		app, sec := createApp(t, e, partner.CreateInput{})
		signed := signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "x"})
		want := "parameter validation failed: API version v1 was retired on " + sunset.Format(time.DateOnly) + "; use " + partnerapi.PartnerAPI[len(partnerapi.PartnerAPI)-1].Name
		var paths []string
		for _, ep := range partnerapi.PartnerAPI[0].Endpoints {
			paths = append(paths, ep.Method+" /api/v1"+ep.Path+"?"+signed, "PATCH /api/v1"+ep.Path+"?"+signed)
		}
		paths = append(paths, "GET /api/v1/orders/query?order_no=x", "GET /api/v1/nope", "GET /api/v1", "DELETE /api/v1/anything/at/all")
		for _, p := range paths {
			method, path, _ := strings.Cut(p, " ")
			r := call(t, e, method, e.PublicURL+path)
			if r.status != http.StatusGone || r.Code != 5002 || r.Message != want || r.Data != nil {
				t.Fatalf("%s: HTTP %d %s", p, r.status, r.body)
			}
			if r.header.Get("API-Version") != "v1" || r.header.Get("Sunset") == "" || r.header.Get("Deprecation") == "" {
				t.Fatalf("%s: headers %v", p, r.header)
			}
		}
		// The signed query was refused before its nonce was recorded: it is
		// still good on v2 (the path is not signed).
		call(t, e, "GET", orderURL(e, "v2")+signed).expect(t, 404, 5001, "order does not exist")
		if err := e.App.Usage.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		rows, err := e.App.DB.APIUsage.Query().Where(apiusage.AppID(app.ID)).All(context.Background())
		if err != nil || len(rows) != 1 || rows[0].Version != "v2" || rows[0].Count != 1 {
			t.Fatalf("usage rows %+v %v, want only the v2 call", rows, err)
		}
	})
}

// TestPartnerUsage: admitted calls are counted per app, version and UTC
// day; refused ones are not; the counts reach the database by the periodic
// flush and add up across instances.
func TestPartnerUsage(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e1 := apptest.Start(t, b, sharedKeyOption())
		e2 := e1
		if !b.Embedded() {
			e1, e2 = startPair(t, b)
		}
		app, sec := createApp(t, e1, partner.CreateInput{})
		send := func(e *apptest.Env, version string, n int) {
			for range n {
				call(t, e, "GET", orderURL(e, version)+signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "x"})).expect(t, 404, 5001, "order")
			}
		}
		send(e1, "v1", 3)
		send(e2, "v1", 2)
		send(e2, "v2", 4)
		// Refused: not counted.
		call(t, e1, "GET", orderURL(e1, "v1")+signedQuery(app.AppKey, "wrong", nowMillis(), freshNonce(), pair{"order_no", "x"})).expect(t, 401, 4002, "signature")
		day := time.Now().UTC().Format(time.DateOnly)
		counts := func() map[string]int64 {
			rows, err := e1.App.DB.APIUsage.Query().Where(apiusage.AppID(app.ID)).All(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]int64{}
			for _, r := range rows {
				m[r.Version+"@"+r.Day] = r.Count
			}
			return m
		}
		eventually(t, 10*time.Second, "usage flushed", func() bool {
			c := counts()
			return c["v1@"+day] == 5 && c["v2@"+day] == 4 && len(c) == 2
		})
		// More calls, then shutdown flushes without waiting for the timer.
		send(e2, "v2", 1)
		if err := e2.App.Usage.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := counts(); c["v2@"+day] != 5 {
			t.Fatalf("after close: %v", c)
		}
	})
}

// TestPartnerKVUnavailable: without its key-value store no signed request
// is let through: 503 with code 6000, quickly.
func TestPartnerKVUnavailable(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var e *apptest.Env
		if b.Embedded() {
			e = apptest.Start(t, b)
		} else {
			e = apptest.Start(t, b, func(c *config.Config) { c.Redis.URL = "redis://127.0.0.1:1/0" })
		}
		app, sec := createApp(t, e, partner.CreateInput{})
		if b.Embedded() {
			// The memory stores answer like an unreachable Redis once closed.
			_ = e.App.Admission.Close()
			_ = e.App.KV.Close()
		}
		for range 3 {
			start := time.Now()
			r := call(t, e, "GET", orderURL(e, "v1")+signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "x"}))
			r.expect(t, 503, 6000, "system busy")
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Fatalf("503 took %v", d)
			}
		}
		// Checks that need no store still answer with their own codes.
		call(t, e, "GET", orderURL(e, "v1")+"app_key=nobody").expect(t, 401, 4001, "invalid app key")
		if logs := e.Logs.String(); strings.Contains(logs, sec) {
			t.Fatal("secret in the log")
		}
	})
}

// TestPartnerHostileInputs: requests signed by the SDK with awkward
// parameters verify and reach the business rules; raw garbage is refused
// with a 4xx. Nothing answers 500.
func TestPartnerHostileInputs(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		app, sec := createApp(t, e, partner.CreateInput{})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "A&B=C;D", Amount: "1.00"})
		c := client(e, app.AppKey, sec)
		ctx := context.Background()
		for _, params := range []url.Values{
			{"order_no": {"A&B=C;D"}},
			{"order_no": {"订单-1"}},
			{"order_no": {"emoji-😀"}},
			{"order_no": {"space and+plus%25"}},
			{"order_no": {""}},
			{"order_no": {"x"}, "": {"empty name"}},
			{"order_no": {"x"}, "a=b&c": {"d=e&f"}},
			{"order_no": {"x"}, "extra": {strings.Repeat("long value ", 3000)}},
			{"order_no": {"x"}, "名字": {"值"}, "Z": {""}, "z": {"\x00\x01"}},
			{"order_no": {"\xff\xfe invalid utf-8"}},
			{"order_no": {"x"}, "sign_type": {"hmac-sha256"}},
		} {
			r, err := c.Do(ctx, "GET", "/api/v1/orders/query", params)
			if err != nil {
				t.Fatalf("%v: %v", params, err)
			}
			if r.HTTPStatus >= 500 || r.Code == 4002 || r.Code == 4001 {
				t.Fatalf("%.80q: HTTP %d code %d %q", params.Encode(), r.HTTPStatus, r.Code, r.Message)
			}
		}
		o, err := c.OrderV1(ctx, "A&B=C;D")
		if err != nil || o.OrderNo != "A&B=C;D" {
			t.Fatalf("order with & = ; in its number: %+v %v", o, err)
		}
		raws := []string{"", "&", "&&&", "=", "==", "%", "a=%", "%%%", ";;", "app_key", "app_key=", "app_key=%00",
			"app_key=" + app.AppKey + "&timestamp=%FF", "app_key=" + app.AppKey + "&timestamp=" + nowMillis() + "&nonce=%E2%28%A1&sign=x",
			"app_key=" + app.AppKey + "&timestamp=" + nowMillis() + "&nonce=" + strings.Repeat("%", 200),
			strings.Repeat("a=b&", 5000)}
		for _, raw := range raws {
			status, _, body, err := get(e.Client, "GET", orderURL(e, "v1")+raw)
			if err != nil {
				t.Fatal(err)
			}
			if status >= 500 || status < 400 {
				t.Fatalf("%.60q: %d %s", raw, status, body)
			}
			decodeEnvelope(t, status, nil, body)
		}
	})
}

var hexSign = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestSDKSignURL(t *testing.T) {
	s := partnerclient.Signer{AppKey: "k", AppSecret: "s",
		Now:   func() time.Time { return time.UnixMilli(1763805600123) },
		Nonce: func() string { return "abc" }}
	u, err := s.SignURL("http://h/api/v1/orders/query?order_no=SO1001&page=2")
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(u)
	q := pu.Query()
	// md5("s" + "1763805600123" + "abc" + "order_noSO1001" + "page2")
	want := md5Sign("s", "1763805600123", "abc", []pair{{"order_no", "SO1001"}, {"page", "2"}})
	if q.Get("sign") != want || !hexSign.MatchString(want) || q.Get("app_key") != "k" || q.Get("timestamp") != "1763805600123" || q.Get("nonce") != "abc" {
		t.Fatalf("signed URL %s", u)
	}
	if _, err := s.SignURL("http://h/x?sign=1"); err == nil {
		t.Fatal("a URL that already has sign must be refused")
	}
	if _, err := s.Sign(url.Values{"a": {"1", "2"}}); err == nil {
		t.Fatal("a repeated parameter must be refused")
	}
	_ = http.MethodGet
}
