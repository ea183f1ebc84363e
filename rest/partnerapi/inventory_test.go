package partnerapi_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"gatehouse/ent"
	"gatehouse/ent/idempotencyrecord"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/inventory"
	"gatehouse/internal/inventory/inventorytest"
	"gatehouse/internal/partner"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerapi"
	"gatehouse/rest/partnerclient"
)

const deductPath = "/api/v1/inventory/deduct"

// invFixture is a running gatehouse with one app (and its SDK client) and
// one SKU.
type invFixture struct {
	e     *apptest.Env
	app   partner.App
	c     *partnerclient.Client
	skuID int
}

func startInventory(t *testing.T, b testenv.Backend, stock int64) *invFixture {
	t.Helper()
	e := apptest.Start(t, b)
	f := &invFixture{e: e}
	f.app, f.c = invApp(t, e, "inv-app")
	s, err := e.App.Inventory.CreateSku(context.Background(), "hot item", stock)
	if err != nil {
		t.Fatalf("create sku: %v", err)
	}
	f.skuID = s.ID
	return f
}

// invApp creates an app with a rate limit no test reaches.
func invApp(t *testing.T, e *apptest.Env, key string) (partner.App, *partnerclient.Client) {
	t.Helper()
	rate := 100_000
	app, sec, err := e.App.Partners.Create(context.Background(), partner.CreateInput{AppName: key, AppKey: key, RateLimit: &rate})
	if err != nil {
		t.Fatalf("create app: %v", err)
	}
	c := partnerclient.New(e.PublicURL, key, sec.AppSecret)
	c.HTTPClient = e.Client
	return app, c
}

func deductParams(bizNo string, skuID int, quantity int64) url.Values {
	return url.Values{"biz_no": {bizNo}, "sku_id": {strconv.Itoa(skuID)}, "quantity": {strconv.FormatInt(quantity, 10)}}
}

// deduct sends a signed deduction; safe in any goroutine.
func (f *invFixture) send(c *partnerclient.Client, params url.Values) (*partnerclient.Response, error) {
	return c.Do(context.Background(), http.MethodPost, deductPath, params)
}

func (f *invFixture) deduct(t *testing.T, params url.Values) *partnerclient.Response {
	t.Helper()
	r, err := f.send(f.c, params)
	if err != nil {
		t.Fatalf("deduct %v: %v", params, err)
	}
	return r
}

func expectReply(t *testing.T, r *partnerclient.Response, status, code int, msgPrefix string) {
	t.Helper()
	if r.HTTPStatus != status || r.Code != code || !strings.HasPrefix(r.Message, msgPrefix) {
		t.Fatalf("got HTTP %d code %d %q; want HTTP %d code %d message starting %q", r.HTTPStatus, r.Code, r.Message, status, code, msgPrefix)
	}
	if code != 200 && len(r.Data) != 0 {
		t.Fatalf("error reply carries data: %s", r.Data)
	}
	if r.RequestID == "" || r.Timestamp == 0 || r.Header.Get("API-Version") != "v1" {
		t.Fatalf("envelope without request id, timestamp or API-Version: %+v", r)
	}
}

func (f *invFixture) stock(t *testing.T) int64 {
	t.Helper()
	s, err := f.e.App.Inventory.Sku(context.Background(), f.skuID)
	if err != nil {
		t.Fatal(err)
	}
	return s.Stock
}

// recordStatus returns the status of bizNo's record, or -1 when none.
func (f *invFixture) recordStatus(t *testing.T, bizNo string) int {
	t.Helper()
	r, err := f.e.App.DB.IdempotencyRecord.Query().Where(idempotencyrecord.BizNo(bizNo)).Only(context.Background())
	if ent.IsNotFound(err) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

func (f *invFixture) records(t *testing.T) int {
	t.Helper()
	n, err := f.e.App.DB.IdempotencyRecord.Query().Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDeductSuccessAndReplay(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := startInventory(t, b, 10)
		first := f.deduct(t, deductParams("ORDER-1", f.skuID, 3))
		expectReply(t, first, 200, 200, "success")
		want := fmt.Sprintf(`{"biz_no":"ORDER-1","sku_id":%d,"quantity":3,"remaining_stock":7}`, f.skuID)
		if string(first.Data) != want {
			t.Fatalf("data %s, want %s", first.Data, want)
		}
		if first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatal("the first reply is marked replayed")
		}
		if got := f.recordStatus(t, "ORDER-1"); got != 1 {
			t.Fatalf("record status %d, want 1", got)
		}
		for range 2 {
			again := f.deduct(t, deductParams("ORDER-1", f.skuID, 3))
			expectReply(t, again, 200, 200, "success")
			if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Data, first.Data) {
				t.Fatalf("repeat: header %q data %s", again.Header.Get("Idempotent-Replayed"), again.Data)
			}
		}
		if f.stock(t) != 7 {
			t.Fatalf("stock %d, want 7: one deduction", f.stock(t))
		}
		// The SDK reports the replay too.
		res, err := f.c.Deduct(context.Background(), partnerclient.DeductRequest{BizNo: "ORDER-1", SkuID: int64(f.skuID), Quantity: 3})
		if err != nil || !res.Replayed || res.RemainingStock != 7 {
			t.Fatalf("SDK repeat = %+v, %v", res, err)
		}
		// HMAC-signed requests deduct the same way.
		h := *f.c
		h.SignType = partnerclient.HMACSHA256
		res, err = h.Deduct(context.Background(), partnerclient.DeductRequest{BizNo: "ORDER-2", SkuID: int64(f.skuID), Quantity: 7})
		if err != nil || res.Replayed || res.RemainingStock != 0 {
			t.Fatalf("HMAC deduction = %+v, %v", res, err)
		}
	})
}

func TestDeductValidation(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := startInventory(t, b, 10)
		id := strconv.Itoa(f.skuID)
		long := strings.Repeat("x", 65)
		cases := []struct {
			name   string
			params url.Values
		}{
			{"no parameters", url.Values{}},
			{"biz_no missing", url.Values{"sku_id": {id}, "quantity": {"1"}}},
			{"biz_no empty", url.Values{"biz_no": {""}, "sku_id": {id}, "quantity": {"1"}}},
			{"biz_no 65 chars", url.Values{"biz_no": {long}, "sku_id": {id}, "quantity": {"1"}}},
			{"biz_no not ASCII", url.Values{"biz_no": {"订单-1"}, "sku_id": {id}, "quantity": {"1"}}},
			{"biz_no control char", url.Values{"biz_no": {"a\x01b"}, "sku_id": {id}, "quantity": {"1"}}},
			{"biz_no newline", url.Values{"biz_no": {"a\nb"}, "sku_id": {id}, "quantity": {"1"}}},
			{"sku_id missing", url.Values{"biz_no": {"V"}, "quantity": {"1"}}},
			{"sku_id zero", url.Values{"biz_no": {"V"}, "sku_id": {"0"}, "quantity": {"1"}}},
			{"sku_id negative", url.Values{"biz_no": {"V"}, "sku_id": {"-1"}, "quantity": {"1"}}},
			{"sku_id text", url.Values{"biz_no": {"V"}, "sku_id": {"abc"}, "quantity": {"1"}}},
			{"sku_id decimal", url.Values{"biz_no": {"V"}, "sku_id": {"1.5"}, "quantity": {"1"}}},
			{"sku_id overflow", url.Values{"biz_no": {"V"}, "sku_id": {"99999999999999999999"}, "quantity": {"1"}}},
			{"quantity missing", url.Values{"biz_no": {"V"}, "sku_id": {id}}},
			{"quantity zero", url.Values{"biz_no": {"V"}, "sku_id": {id}, "quantity": {"0"}}},
			{"quantity negative", url.Values{"biz_no": {"V"}, "sku_id": {id}, "quantity": {"-2"}}},
			{"quantity too large", url.Values{"biz_no": {"V"}, "sku_id": {id}, "quantity": {"1000001"}}},
			{"quantity decimal", url.Values{"biz_no": {"V"}, "sku_id": {id}, "quantity": {"1.0"}}},
			{"quantity text", url.Values{"biz_no": {"V"}, "sku_id": {id}, "quantity": {"many"}}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := f.deduct(t, c.params)
				expectReply(t, r, 400, 5002, "parameter validation failed: ")
			})
		}
		if n := f.records(t); n != 0 {
			t.Fatalf("invalid requests left %d records", n)
		}
		if f.stock(t) != 10 {
			t.Fatal("invalid requests changed stock")
		}
		// The boundaries are accepted.
		big, err := f.e.App.Inventory.CreateSku(context.Background(), "bulk", 2_000_000)
		if err != nil {
			t.Fatal(err)
		}
		edge := strings.Repeat("Z", 63) + "~"
		r := f.deduct(t, deductParams(edge, big.ID, 1_000_000))
		expectReply(t, r, 200, 200, "success")
		r = f.deduct(t, deductParams("with space", f.skuID, 1))
		expectReply(t, r, 200, 200, "success")

		// Only POST; other methods are refused before the gate.
		st, hd := rawCall(t, f.e, http.MethodGet, f.e.PublicURL+deductPath)
		if st != http.StatusMethodNotAllowed || hd.Get("Allow") != "POST" {
			t.Fatalf("GET: HTTP %d Allow %q", st, hd.Get("Allow"))
		}
		// Unsigned: refused by the gate, nothing recorded.
		st, _ = rawCall(t, f.e, http.MethodPost, f.e.PublicURL+deductPath+"?biz_no=U&sku_id="+id+"&quantity=1")
		if st != http.StatusUnauthorized || f.recordStatus(t, "U") != -1 {
			t.Fatalf("unsigned: HTTP %d", st)
		}
	})
}

func rawCall(t *testing.T, e *apptest.Env, method, u string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func TestDeductOutcomesAndRepeats(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := startInventory(t, b, 5)
		_, other := invApp(t, f.e, "inv-other")

		expectReply(t, f.deduct(t, deductParams("OK-1", f.skuID, 2)), 200, 200, "success")

		// Insufficient stock: 409/5002, record failed.
		r := f.deduct(t, deductParams("SHORT-1", f.skuID, 4))
		expectReply(t, r, 409, 5002, "insufficient stock")
		if r.Message != "insufficient stock" {
			t.Fatalf("message %q", r.Message)
		}
		// Unknown SKU: 400/5002, record failed.
		expectReply(t, f.deduct(t, deductParams("NOSKU-1", f.skuID+1000, 1)), 400, 5002, "parameter validation failed")
		for _, biz := range []string{"SHORT-1", "NOSKU-1"} {
			if got := f.recordStatus(t, biz); got != 2 {
				t.Fatalf("record %s status %d, want 2", biz, got)
			}
		}

		// Repeats of failures: 409/5001 "business failed", even when the
		// stock would now suffice.
		if _, err := f.e.App.Inventory.SetStock(context.Background(), f.skuID, 100); err != nil {
			t.Fatal(err)
		}
		for _, p := range []url.Values{deductParams("SHORT-1", f.skuID, 4), deductParams("NOSKU-1", f.skuID+1000, 1)} {
			r := f.deduct(t, p)
			expectReply(t, r, 409, 5001, "business failed")
			if r.Message != "business failed" {
				t.Fatalf("message %q", r.Message)
			}
		}
		// Same biz_no, other parameters: 422/5002.
		expectReply(t, f.deduct(t, deductParams("OK-1", f.skuID, 3)), 422, 5002, "parameter validation failed")
		expectReply(t, f.deduct(t, deductParams("OK-1", f.skuID+1000, 2)), 422, 5002, "parameter validation failed")
		expectReply(t, f.deduct(t, deductParams("SHORT-1", f.skuID, 5)), 422, 5002, "parameter validation failed")
		// Another app's biz_no: 403/5003, whatever the parameters.
		for _, p := range []url.Values{deductParams("OK-1", f.skuID, 2), deductParams("OK-1", f.skuID, 9), deductParams("SHORT-1", f.skuID, 4)} {
			r, err := f.send(other, p)
			if err != nil {
				t.Fatal(err)
			}
			expectReply(t, r, 403, 5003, "no access to the resource")
		}
		if f.stock(t) != 100 {
			t.Fatalf("stock %d, want 100: no refused request deducts", f.stock(t))
		}
		if n := f.records(t); n != 3 {
			t.Fatalf("%d records, want 3", n)
		}
		// The stored success is still replayed to its owner.
		r = f.deduct(t, deductParams("OK-1", f.skuID, 2))
		expectReply(t, r, 200, 200, "success")
		if r.Header.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(r.Data), `"remaining_stock":3`) {
			t.Fatalf("replay: %s", r.Data)
		}
	})
}

// parallelDeduct sends the requests at once and returns the replies in order.
func parallelDeduct(t *testing.T, f *invFixture, params []url.Values) []*partnerclient.Response {
	t.Helper()
	out := make([]*partnerclient.Response, len(params))
	errs := make([]error, len(params))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, p := range params {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = f.send(f.c, p)
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeductConcurrentDistinctBizNos(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := startInventory(t, b, 30)
		params := make([]url.Values, 50)
		for i := range params {
			params[i] = deductParams(fmt.Sprintf("P-%02d", i), f.skuID, 1)
		}
		ok, short := 0, 0
		for i, r := range parallelDeduct(t, f, params) {
			switch {
			case r.HTTPStatus == 200 && r.Code == 200:
				ok++
			case r.HTTPStatus == 409 && r.Code == 5002 && r.Message == "insufficient stock":
				short++
			default:
				t.Fatalf("request %d: HTTP %d code %d %q", i, r.HTTPStatus, r.Code, r.Message)
			}
		}
		if ok != 30 || short != 20 {
			t.Fatalf("%d × 200 and %d × 409; want 30 and 20", ok, short)
		}
		if f.stock(t) != 0 {
			t.Fatalf("final stock %d, want 0", f.stock(t))
		}
	})
}

func TestDeductConcurrentSameBizNoOverHTTP(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := startInventory(t, b, 100)
		params := make([]url.Values, 20)
		for i := range params {
			params[i] = deductParams("ONE-BIZ", f.skuID, 6)
		}
		replies := parallelDeduct(t, f, params)
		replayed := 0
		for i, r := range replies {
			if r.HTTPStatus != 200 || r.Code != 200 {
				t.Fatalf("request %d: HTTP %d code %d %q", i, r.HTTPStatus, r.Code, r.Message)
			}
			if !bytes.Equal(r.Data, replies[0].Data) {
				t.Fatalf("request %d data %s, request 0 %s", i, r.Data, replies[0].Data)
			}
			switch r.Header.Get("Idempotent-Replayed") {
			case "true":
				replayed++
			case "":
			default:
				t.Fatalf("Idempotent-Replayed: %q", r.Header.Get("Idempotent-Replayed"))
			}
		}
		if replayed != 19 {
			t.Fatalf("%d replies marked replayed, want 19", replayed)
		}
		if f.stock(t) != 94 || !strings.Contains(string(replies[0].Data), `"remaining_stock":94`) {
			t.Fatalf("stock %d, data %s; want one deduction to 94", f.stock(t), replies[0].Data)
		}
	})
}

func TestDeductFaultInjection(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := startInventory(t, b, 10)
		// An unexpected error raised inside the deduction after the
		// decrement: 500, stock unchanged, the biz_no failed.
		biz := "FAULT-after-decrement"
		remove := inventorytest.FailDecrement(t, f.e.App.DB, f.skuID, "injected fault 7c1e")
		r := f.deduct(t, deductParams(biz, f.skuID, 4))
		remove()
		expectReply(t, r, 500, 6000, "system busy")
		if strings.Contains(r.Message, "7c1e") {
			t.Fatalf("internal error text reached the caller: %q", r.Message)
		}
		if f.stock(t) != 10 {
			t.Fatalf("stock %d after the fault, want 10", f.stock(t))
		}
		if got := f.recordStatus(t, biz); got != 2 {
			t.Fatalf("record status %d, want 2", got)
		}
		if !strings.Contains(f.e.Logs.String(), "7c1e") || !strings.Contains(f.e.Logs.String(), r.RequestID) {
			t.Fatal("the failure is not logged with its request id")
		}
		expectReply(t, f.deduct(t, deductParams(biz, f.skuID, 4)), 409, 5001, "business failed")

		r = f.deduct(t, deductParams("AFTER-FAULTS", f.skuID, 4))
		expectReply(t, r, 200, 200, "success")
		if f.stock(t) != 6 {
			t.Fatalf("stock %d, want 6", f.stock(t))
		}
		if b.Embedded() {
			return
		}

		// A failed commit is a dependency failure: 503/6000, nothing
		// recorded, and the same biz_no succeeds when retried.
		remove = inventorytest.FailCommit(t, f.e.App.DB, "COMMIT-")
		r = f.deduct(t, deductParams("COMMIT-LOST", f.skuID, 2))
		remove()
		expectReply(t, r, 503, 6000, "system busy")
		if r.Header.Get("Retry-After") == "" || strings.Contains(r.Message, "injected") {
			t.Fatalf("503: Retry-After %q, message %q", r.Header.Get("Retry-After"), r.Message)
		}
		if got := f.recordStatus(t, "COMMIT-LOST"); got != -1 {
			t.Fatalf("record status %d after a failed commit, want none", got)
		}
		expectReply(t, f.deduct(t, deductParams("COMMIT-LOST", f.skuID, 2)), 200, 200, "success")
		if f.stock(t) != 4 {
			t.Fatalf("stock %d, want 4", f.stock(t))
		}
	})
}

// The outcomes that black-box tests cannot provoke cheaply, through the
// handler with an admitted request in its context: a biz_no another
// process holds in status 0 past the wait bound, and a database that does
// not answer.
func TestDeductErrorMapping(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "map.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.IdempotencyRecord.Create().SetBizNo("HELD").SetAppKey("k").SetAPIPath(inventory.APIPath).
		SetRequestParams(`{"biz_no":"HELD","quantity":1,"sku_id":1}`).SetStatus(inventory.StatusProcessing).Save(ctx); err != nil {
		t.Fatal(err)
	}
	held := inventory.NewService(db, inventory.WithInFlightWait(50*time.Millisecond))

	pool, err := sql.Open("pgx", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	down := inventory.NewService(&store.DB{Client: ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, pool))), SQL: pool, Dialect: dialect.Postgres})

	logs := &apptest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	serve := func(svc *inventory.Service, admitted bool, query string) (*httptest.ResponseRecorder, partnerapi.Envelope) {
		h := partnerapi.Inventory{Svc: svc, Log: log}
		req := httptest.NewRequest(http.MethodPost, deductPath+"?"+query, nil)
		if admitted {
			req = req.WithContext(partner.NewContext(req.Context(), &partner.Admitted{
				App:   &partner.App{ID: 1, AppKey: "k", Status: partner.Enabled},
				Query: partner.ParseSignedQuery(query),
			}))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var env partnerapi.Envelope
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatalf("not an envelope: %s", rec.Body)
		}
		return rec, env
	}

	rec, env := serve(held, true, "biz_no=HELD&sku_id=1&quantity=1")
	if rec.Code != http.StatusConflict || env.Code != 6000 || !strings.HasPrefix(env.Message, "system busy: ") || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("held biz_no: HTTP %d %+v Retry-After %q", rec.Code, env, rec.Header().Get("Retry-After"))
	}
	rec, env = serve(down, true, "biz_no=D&sku_id=1&quantity=1")
	if rec.Code != http.StatusServiceUnavailable || env.Code != 6000 || strings.Contains(env.Message, "127.0.0.1") {
		t.Fatalf("database down: HTTP %d %+v", rec.Code, env)
	}
	rec, env = serve(down, true, "biz_no=D&sku_id=1&quantity=0")
	if rec.Code != http.StatusBadRequest || env.Code != 5002 {
		t.Fatalf("invalid input with the database down: HTTP %d %+v", rec.Code, env)
	}
	rec, env = serve(held, false, "biz_no=X&sku_id=1&quantity=1")
	if rec.Code != http.StatusInternalServerError || env.Code != 6000 || env.Message != "system busy" {
		t.Fatalf("not admitted: HTTP %d %+v", rec.Code, env)
	}
	if !strings.Contains(logs.String(), "database unavailable") || !strings.Contains(logs.String(), "signed-request gate") {
		t.Fatalf("failures not logged:\n%s", logs)
	}
}
