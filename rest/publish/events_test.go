package publish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookpublication"
	"gatehouse/internal/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
)

// invoiceSchema is the schema of the custom type the publish tests use.
const invoiceSchema = `{"type": "object", "required": ["invoice_no", "amount", "lines"], "properties": {
  "invoice_no": {"type": "string"}, "amount": {"type": "number"},
  "lines": {"type": "array", "items": {"type": "object", "required": ["sku", "qty"],
    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}}}}}`

const invoiceData = `{"invoice_no": "INV-1", "amount": 9.5, "lines": [{"sku": "A-1", "qty": 2}]}`

// publishEnv is a running gatehouse with an app that has one endpoint,
// two custom event types and keys of each role.
type publishEnv struct {
	*apptest.Env
	appID                 int
	publisher, admin, ro  string
	unscoped, otherScoped string
}

func startPublish(t *testing.T, b testenv.Backend) *publishEnv {
	t.Helper()
	e := apptest.Start(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(sink.Close)
	ctx := context.Background()
	app, _ := apptest.CreateApp(t, e, partner.CreateInput{AppName: "Publish", CallbackURL: sink.URL + "/hook"})
	for _, name := range []string{"invoice.issued", "shipment.sent"} {
		if _, err := e.App.Webhooks.CreateEventType(ctx, name, "test", json.RawMessage(invoiceSchema), nil); err != nil {
			t.Fatal(err)
		}
	}
	key := func(role apikey.Role, scopes ...string) string {
		_, k, err := e.App.APIKeys.CreateScoped(ctx, "k-"+string(role)+strings.Join(scopes, ","), role, scopes)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	return &publishEnv{Env: e, appID: app.ID,
		publisher: key(apikey.RolePublisher, "invoice.*"), admin: key(apikey.RoleAdmin), ro: key(apikey.RoleReadOnly),
		unscoped: key(apikey.RolePublisher), otherScoped: key(apikey.RolePublisher, "shipment.sent")}
}

func (p *publishEnv) post(t testing.TB, path, key, body string, headers ...string) apptest.Response {
	t.Helper()
	h := append([]string{"Content-Type", "application/json"}, headers...)
	if key != "" {
		h = append(h, "X-API-Key", key)
	}
	return p.Do(t, http.MethodPost, p.AdminURL+path, body, h...)
}

func (p *publishEnv) event(typ, data string) string {
	return fmt.Sprintf(`{"app_id": %d, "event_type": %q, "biz_data": %s}`, p.appID, typ, data)
}

// stored counts the messages (distinct event ids of deliveries) and the
// idempotency rows: what a refused request must leave unchanged.
func (p *publishEnv) stored(t testing.TB) (deliveries, keys int) {
	t.Helper()
	ctx := context.Background()
	d, err := p.App.DB.Client.WebhookDelivery.Query().Where(webhookdelivery.EventTypeIn("invoice.issued", "shipment.sent")).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k, err := p.App.DB.Client.WebhookPublication.Query().Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return d, k
}

func (p *publishEnv) deliveriesOf(t testing.TB, id string) int {
	t.Helper()
	n, err := p.App.DB.Client.WebhookDelivery.Query().Where(webhookdelivery.EventID(id)).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPublishREST: a PUBLISHER key publishes one event (201, the message
// id, one delivery); the same Idempotency-Key again, and concurrently,
// gives that message and nothing new.
func TestPublishREST(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		p := startPublish(t, b)
		r := p.post(t, "/api/events", p.publisher, p.event("invoice.issued", invoiceData), "Idempotency-Key", "inv-1")
		if r.Status != http.StatusCreated {
			t.Fatalf("publish: %d %s\n%s", r.Status, r.Body, p.Logs.String())
		}
		m := r.Map(t)
		id, _ := m["id"].(string)
		if !strings.HasPrefix(id, "msg_") || m["replayed"] != false || m["deliveries"] != float64(1) || m["event_type"] != "invoice.issued" {
			t.Fatalf("publish answer: %s", r.Body)
		}
		if n := p.deliveriesOf(t, id); n != 1 {
			t.Fatalf("%d deliveries of %s", n, id)
		}
		again := p.post(t, "/api/events", p.publisher, p.event("invoice.issued", invoiceData), "Idempotency-Key", "inv-1")
		if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || again.Map(t)["id"] != id || again.Map(t)["replayed"] != true {
			t.Fatalf("repeat: %d %v %s", again.Status, again.Header, again.Body)
		}
		if n := p.deliveriesOf(t, id); n != 1 {
			t.Fatalf("the repeat queued a delivery: %d", n)
		}
		// Without a key, each publish is a new message.
		plain := p.post(t, "/api/events", p.publisher, p.event("invoice.issued", invoiceData))
		if plain.Status != http.StatusCreated || plain.Map(t)["id"] == id {
			t.Fatalf("publish without a key: %d %s", plain.Status, plain.Body)
		}
		// An ADMIN key may publish too.
		if r := p.post(t, "/api/events", p.admin, p.event("shipment.sent", invoiceData)); r.Status != http.StatusCreated {
			t.Fatalf("ADMIN publish: %d %s", r.Status, r.Body)
		}

		// Concurrent publishes of one new key: one message.
		const n = 12
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := p.post(t, "/api/events", p.publisher, p.event("invoice.issued", invoiceData), "Idempotency-Key", "inv-concurrent")
				if r.Status != http.StatusCreated && r.Status != http.StatusOK {
					t.Errorf("concurrent publish: %d %s", r.Status, r.Body)
					return
				}
				ids[i], _ = r.Map(t)["id"].(string)
			}()
		}
		wg.Wait()
		for _, got := range ids {
			if got != ids[0] {
				t.Fatalf("concurrent publishes of one key gave several messages: %v", ids)
			}
		}
		if c := p.deliveriesOf(t, ids[0]); c != 1 {
			t.Fatalf("concurrent publishes of one key: %d deliveries", c)
		}
		keys, err := p.App.DB.Client.WebhookPublication.Query().Where(webhookpublication.IdempotencyKey("inv-concurrent")).Count(context.Background())
		if err != nil || keys != 1 {
			t.Fatalf("idempotency rows of the key: %d %v", keys, err)
		}
	})
}

// TestPublishRESTRefusals: bad input gets a clear 4xx and nothing is
// stored: a payload against its schema (422 naming the path), an unknown
// app or type (404), a type outside the key's scopes (403), a READ_ONLY
// key (403), no key (401), malformed JSON (400), an oversized batch (413).
func TestPublishRESTRefusals(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		p := startPublish(t, b)
		d0, k0 := p.stored(t)
		bad := `{"invoice_no": "INV-2", "amount": 1, "lines": [{"sku": "A-1", "qty": 0}]}`
		many := make([]string, 501)
		for i := range many {
			many[i] = p.event("invoice.issued", invoiceData)
		}
		for _, c := range []struct {
			name, path, key, body string
			headers               []string
			status                int
			code, field, jpath    string
		}{
			{"schema", "/api/events", p.publisher, p.event("invoice.issued", bad), []string{"Idempotency-Key", "bad-1"}, 422, "schema_mismatch", "biz_data", "$.lines[0].qty"},
			{"missing property", "/api/events", p.publisher, p.event("invoice.issued", `{"amount": 1, "lines": []}`), nil, 422, "schema_mismatch", "biz_data", "$.invoice_no"},
			{"unknown app", "/api/events", p.publisher, fmt.Sprintf(`{"app_id": 987654, "event_type": "invoice.issued", "biz_data": %s}`, invoiceData), nil, 404, "app_not_found", "app_id", ""},
			{"unknown type", "/api/events", p.publisher, p.event("invoice.voided", invoiceData), nil, 404, "event_type_not_found", "event_type", ""},
			{"outside scopes", "/api/events", p.publisher, p.event("shipment.sent", invoiceData), nil, 403, "forbidden", "", ""},
			{"other scope", "/api/events", p.otherScoped, p.event("invoice.issued", invoiceData), nil, 403, "forbidden", "", ""},
			{"built-in type", "/api/events", p.unscoped, p.event("order.paid", invoiceData), nil, 400, "validation_failed", "event_type", ""},
			{"read-only key", "/api/events", p.ro, p.event("invoice.issued", invoiceData), nil, 403, "forbidden", "", ""},
			{"no key", "/api/events", "", p.event("invoice.issued", invoiceData), nil, 401, "missing_api_key", "", ""},
			{"wrong key", "/api/events", "ghk_nope", p.event("invoice.issued", invoiceData), nil, 401, "invalid_api_key", "", ""},
			{"malformed JSON", "/api/events", p.publisher, `{"app_id": 1,`, nil, 400, "invalid_json", "", ""},
			{"not an object", "/api/events", p.publisher, `[1]`, nil, 400, "validation_failed", "", ""},
			{"no app", "/api/events", p.publisher, `{"event_type": "invoice.issued", "biz_data": {}}`, nil, 400, "validation_failed", "app_id", ""},
			{"no payload", "/api/events", p.publisher, fmt.Sprintf(`{"app_id": %d, "event_type": "invoice.issued"}`, p.appID), nil, 400, "validation_failed", "biz_data", ""},
			{"unknown field", "/api/events", p.publisher, fmt.Sprintf(`{"app_id": %d, "event_type": "invoice.issued", "bizData": {}}`, p.appID), nil, 400, "validation_failed", "bizData", ""},
			{"empty key", "/api/events", p.publisher, p.event("invoice.issued", invoiceData), []string{"Idempotency-Key", ""}, 400, "validation_failed", "idempotency_key", ""},
			{"key with spaces", "/api/events", p.publisher, p.event("invoice.issued", invoiceData), []string{"Idempotency-Key", "a b"}, 400, "validation_failed", "idempotency_key", ""},
			{"NUL", "/api/events", p.publisher, p.event("invoice.issued", `{"invoice_no": "a\u0000b", "amount": 1, "lines": []}`), nil, 400, "validation_failed", "", ""},
			{"too large", "/api/events", p.publisher, p.event("invoice.issued", `{"invoice_no": "`+strings.Repeat("x", 600<<10)+`", "amount": 1, "lines": []}`), nil, 413, "payload_too_large", "", ""},
			{"oversized batch", "/api/events/batch", p.publisher, `{"events": [` + strings.Join(many, ",") + `]}`, nil, 413, "too_many_events", "events", ""},
			{"empty batch", "/api/events/batch", p.publisher, `{"events": []}`, nil, 400, "validation_failed", "events", ""},
			{"batch not a list", "/api/events/batch", p.publisher, `{"events": {}}`, nil, 400, "validation_failed", "events", ""},
			{"batch malformed", "/api/events/batch", p.publisher, `{"events": [`, nil, 400, "invalid_json", "", ""},
			{"batch without key", "/api/events/batch", "", `{"events": [` + p.event("invoice.issued", invoiceData) + `]}`, nil, 401, "missing_api_key", "", ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := p.post(t, c.path, c.key, c.body, c.headers...)
				m := r.Map(t)
				if r.Status != c.status || m["error"] != c.code || (c.field != "" && m["field"] != c.field) || (c.jpath != "" && m["path"] != c.jpath) {
					t.Errorf("HTTP %d %s; want %d %s field %q path %q", r.Status, r.Body, c.status, c.code, c.field, c.jpath)
				}
				if msg, _ := m["message"].(string); msg == "" && !strings.HasSuffix(c.code, "api_key") {
					t.Errorf("no message: %s", r.Body)
				}
			})
		}
		if d, k := p.stored(t); d != d0 || k != k0 {
			t.Fatalf("refused publishes stored something: deliveries %d → %d, keys %d → %d", d0, d, k0, k)
		}
	})
}

// TestPublishBatchREST: a batch with one invalid event delivers the valid
// ones and reports the invalid one with its path; each event's key works
// as a single publish's (a repeat in the batch, and a later batch, answer
// the first message).
func TestPublishBatchREST(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		p := startPublish(t, b)
		ev := func(typ, data, key string) string {
			return fmt.Sprintf(`{"app_id": %d, "event_type": %q, "biz_data": %s, "idempotency_key": %q}`, p.appID, typ, data, key)
		}
		body := `{"events": [` + strings.Join([]string{
			ev("invoice.issued", invoiceData, "b-1"),
			ev("invoice.issued", `{"invoice_no": "X", "amount": "ten", "lines": []}`, "b-2"),
			ev("invoice.issued", invoiceData, "b-3"),
			ev("invoice.issued", invoiceData, "b-1"),
			ev("shipment.sent", invoiceData, "b-5"),
			fmt.Sprintf(`{"app_id": 987654, "event_type": "invoice.issued", "biz_data": %s}`, invoiceData),
			`"not an event"`,
		}, ",") + `]}`
		r := p.post(t, "/api/events/batch", p.publisher, body)
		if r.Status != http.StatusOK {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		var out struct {
			Results []struct {
				Index  int
				Status int
				Event  *struct {
					ID         string
					Replayed   bool
					Deliveries int
				}
				Error *struct {
					Error, Field, Path, Message string
				}
			}
		}
		r.JSON(t, &out)
		if len(out.Results) != 7 {
			t.Fatalf("results: %s", r.Body)
		}
		want := []struct {
			status int
			code   string
		}{{201, ""}, {422, "schema_mismatch"}, {201, ""}, {200, ""}, {403, "forbidden"}, {404, "app_not_found"}, {400, "validation_failed"}}
		for i, w := range want {
			res := out.Results[i]
			code := ""
			if res.Error != nil {
				code = res.Error.Error
			}
			if res.Index != i || res.Status != w.status || code != w.code || (w.code == "") != (res.Event != nil) {
				t.Errorf("result %d: %+v; want %d %s (%s)", i, res, w.status, w.code, r.Body)
			}
		}
		if e := out.Results[1].Error; e == nil || e.Path != "$.amount" || e.Field != "biz_data" {
			t.Errorf("the invalid event's error: %s", r.Body)
		}
		first, third, repeat := out.Results[0].Event, out.Results[2].Event, out.Results[3].Event
		if first == nil || third == nil || repeat == nil || repeat.ID != first.ID || !repeat.Replayed || first.Deliveries != 1 {
			t.Fatalf("events: %s", r.Body)
		}
		if p.deliveriesOf(t, first.ID) != 1 || p.deliveriesOf(t, third.ID) != 1 {
			t.Fatalf("the valid events were not queued once each")
		}
		if d, k := p.stored(t); d != 2 || k != 2 {
			t.Fatalf("after the batch: %d deliveries, %d keys; want 2 and 2", d, k)
		}
		// The same keys in a later batch and alone: the first messages.
		again := p.post(t, "/api/events/batch", p.publisher, `{"events": [`+ev("invoice.issued", invoiceData, "b-3")+`]}`)
		if !strings.Contains(string(again.Body), third.ID) || !strings.Contains(string(again.Body), `"replayed":true`) {
			t.Fatalf("a later batch with a used key: %s", again.Body)
		}
		single := p.post(t, "/api/events", p.publisher, p.event("invoice.issued", invoiceData), "Idempotency-Key", "b-1")
		if single.Status != http.StatusOK || single.Map(t)["id"] != first.ID {
			t.Fatalf("a single publish with a batch's key: %d %s", single.Status, single.Body)
		}
		if d, _ := p.stored(t); d != 2 {
			t.Fatalf("repeats queued deliveries: %d", d)
		}
		// A batch of the limit is taken whole.
		evs := make([]string, 500)
		for i := range evs {
			evs[i] = ev("invoice.issued", invoiceData, "full-"+strconv.Itoa(i))
		}
		full := p.post(t, "/api/events/batch", p.publisher, `{"events": [`+strings.Join(evs, ",")+`]}`)
		if full.Status != http.StatusOK || strings.Count(string(full.Body), `"status":201`) != 500 {
			t.Fatalf("a batch of 500: %d %.300s", full.Status, full.Body)
		}
		if d, k := p.stored(t); d != 502 || k != 502 {
			t.Fatalf("after the batch of 500: %d deliveries, %d keys", d, k)
		}
	})
}
