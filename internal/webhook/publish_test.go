package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/errs"
	"gatehouse/internal/order"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/catalogue"
	"gatehouse/internal/webhook/dispatch"
)

// invoiceSchema is the custom type the tests declare.
const invoiceSchema = `{
  "type": "object",
  "required": ["invoice_no", "lines"],
  "properties": {
    "invoice_no": {"type": "string", "minLength": 1},
    "issued_at": {"type": "string", "format": "date-time"},
    "lines": {"type": "array", "items": {
      "type": "object", "required": ["sku", "qty"],
      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}
    }}
  },
  "examples": [{"invoice_no": "INV-1", "lines": [{"sku": "A-1", "qty": 2}]}]
}`

func declareInvoice(t testing.TB, e *env) {
	t.Helper()
	if _, err := e.svc.CreateEventType(context.Background(), "invoice.issued", "An invoice was issued.", json.RawMessage(invoiceSchema), nil); err != nil {
		t.Fatal(err)
	}
}

// TestEventCatalogue: the catalogue lists the built-in types (declared by
// the order package, and webhook.test) with schema and example, then the
// custom ones; a custom type's name, description, schema and example are
// checked, and a name is declared once.
func TestEventCatalogue(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{})
		ctx := context.Background()
		types, err := e.svc.EventTypes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ty := range types {
			names = append(names, ty.Name)
			if !ty.BuiltIn || ty.Description == "" || !json.Valid(ty.Schema) || !json.Valid(ty.Example) {
				t.Errorf("built-in type %+v", ty)
			}
		}
		if want := []string{webhook.EventTest, order.EventPaid, order.EventRefunded, order.EventCancelled}; !equal(names, want) {
			t.Fatalf("built-in types %v, want %v", names, want)
		}

		bad := []struct {
			name, desc, schema, example string
			field                       string
		}{
			{"Invoice.Issued", "d", `{}`, "", "name"},
			{"invoice", "d", `{}`, "", "name"},
			{"invoice..issued", "d", `{}`, "", "name"},
			{"order.shipped", "d", `{}`, "", "name"},  // a built-in namespace
			{"webhook.custom", "d", `{}`, "", "name"}, // idem
			{"invoice.issued", "", `{}`, "", "description"},
			{"invoice.issued", "d", `[1]`, "", "schema"},
			{"invoice.issued", "d", `{"type": 5}`, "", "schema"},
			{"invoice.issued", "d", `{"$ref": "file:///etc/passwd"}`, "", "schema"},
			{"invoice.issued", "d", `{"$ref": "http://127.0.0.1:1/schema.json"}`, "", "schema"},
			{"invoice.issued", "d", `{"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`, "", "schema"},
			{"invoice.issued", "d", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`, "", "schema"},
			{"invoice.issued", "d", `{"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`, `{}`, "schema"},
			{"invoice.issued", "d", invoiceSchema, `{"invoice_no": "I-1"}`, "example"},
		}
		for _, c := range bad {
			var ex json.RawMessage
			if c.example != "" {
				ex = json.RawMessage(c.example)
			}
			_, err := e.svc.CreateEventType(ctx, c.name, c.desc, json.RawMessage(c.schema), ex)
			if errs.KindOf(err) != errs.Validation || errs.Field(err) != c.field {
				t.Errorf("CreateEventType(%q, %q, %s, %s): %v (field %q), want a validation error on %s", c.name, c.desc, c.schema, c.example, err, errs.Field(err), c.field)
			}
		}

		declareInvoice(t, e)
		ty, err := e.svc.EventType(ctx, "invoice.issued")
		if err != nil || ty.BuiltIn || string(ty.Example) != `{"invoice_no":"INV-1","lines":[{"sku":"A-1","qty":2}]}` {
			t.Fatalf("declared type %+v (%v): the schema's first example is its example", ty, err)
		}
		_, err = e.svc.CreateEventType(ctx, "invoice.issued", "again", json.RawMessage(`{}`), nil)
		if errs.KindOf(err) != errs.Conflict {
			t.Errorf("a second invoice.issued: %v, want a conflict", err)
		}
		if _, err := e.svc.CreateEventType(ctx, "shipment.sent", "A shipment left.", json.RawMessage(`{"type":"object"}`), json.RawMessage(`{"carrier":"x"}`)); err != nil {
			t.Fatal(err)
		}
		types, err = e.svc.EventTypes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(types); n != 6 || types[4].Name != "invoice.issued" || types[5].Name != "shipment.sent" || string(types[5].Example) != `{"carrier":"x"}` {
			t.Errorf("catalogue after two declarations: %+v", types[4:])
		}
		if _, err := e.svc.EventType(ctx, "nothing.here"); !errors.Is(err, catalogue.ErrTypeNotFound) {
			t.Errorf("unknown type: %v", err)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPublish: a published event of a custom type is checked against the
// type's schema (the first error's path is named), goes out like a
// built-in event (signed, same webhook-id as the message), and its
// repeat with the same idempotency key sends nothing new.
func TestPublish(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(http.StatusNoContent))
		appID, secret := e.newApp(t, rcv.URL)
		declareInvoice(t, e)

		for _, c := range []struct{ biz, path string }{
			{`{"invoice_no": "I-1", "lines": [{"sku": "A", "qty": 2}, {"sku": "B", "qty": 0}]}`, "$.lines[1].qty"},
			{`{"lines": []}`, "$.invoice_no"},
			{`{"invoice_no": "I-1", "lines": [{"qty": 1}]}`, "$.lines[0].sku"},
			{`{"invoice_no": "I-1", "lines": [], "issued_at": "yesterday"}`, "$.issued_at"},
			{`["not", "an", "object"]`, "$"},
		} {
			_, err := e.svc.Publish(ctx, appID, "invoice.issued", json.RawMessage(c.biz), "")
			var se *catalogue.SchemaError
			if errs.KindOf(err) != errs.Validation || errs.Field(err) != "bizData" || !errors.As(err, &se) || se.Path != c.path {
				t.Errorf("publish %s: %v, want a validation error at %s", c.biz, err, c.path)
			}
		}
		if _, err := e.svc.Publish(ctx, appID, "invoice.voided", json.RawMessage(`{}`), ""); !errors.Is(err, catalogue.ErrTypeNotFound) {
			t.Errorf("unknown type: %v", err)
		}
		if _, err := e.svc.Publish(ctx, appID, order.EventPaid, json.RawMessage(`{}`), ""); errs.Field(err) != "eventType" {
			t.Errorf("a built-in type: %v, want refused", err)
		}
		good := json.RawMessage(`{"invoice_no":"I-2","lines":[{"sku":"A","qty":2}]}`)
		if _, err := e.svc.Publish(ctx, appID+1000, "invoice.issued", good, ""); !errors.Is(err, webhook.ErrAppNotFound) {
			t.Errorf("unknown app: %v", err)
		}
		if _, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "has space"); errs.Field(err) != "idempotencyKey" {
			t.Errorf("a key with a space: %v", err)
		}
		if n := rcv.count(); n != 0 {
			t.Fatalf("refused publishes sent %d webhooks", n)
		}

		m, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "inv-I-2")
		if err != nil {
			t.Fatal(err)
		}
		if m.Replayed || len(m.Deliveries) != 1 || m.Deliveries[0].EventID != m.ID {
			t.Fatalf("published %+v", m)
		}
		e.waitStatus(t, m.Deliveries[0].ID, dispatch.StatusSuccess, 10*time.Second)
		r := rcv.requests()[0]
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(r.body, r.header); err != nil || r.header.Get("webhook-id") != m.ID {
			t.Fatalf("delivery: signature %v, webhook-id %s want %s", err, r.header.Get("webhook-id"), m.ID)
		}
		if msg := message(t, r.body); msg.EventType != "invoice.issued" || msg.BizData != string(good) {
			t.Fatalf("message %+v", msg)
		}

		// The same key: the first message, nothing sent (even with other
		// arguments).
		again, err := e.svc.Publish(ctx, appID, "invoice.issued", json.RawMessage(`{"invoice_no":"I-3","lines":[]}`), "inv-I-2")
		if err != nil || !again.Replayed || again.ID != m.ID || string(again.BizData) != string(good) || len(again.Deliveries) != 1 {
			t.Fatalf("repeat: %+v, %v", again, err)
		}
		n, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.EventType("invoice.issued")).Count(ctx)
		if err != nil || n != 1 {
			t.Fatalf("%d invoice.issued deliveries (%v), want 1", n, err)
		}
		// Without a key each call is a new message.
		m2, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "")
		if err != nil || m2.ID == m.ID {
			t.Fatalf("publish without a key: %+v %v", m2, err)
		}
		e.waitStatus(t, m2.Deliveries[0].ID, dispatch.StatusSuccess, 10*time.Second)
		if got := rcv.count(); got != 2 {
			t.Errorf("receiver got %d deliveries, want 2", got)
		}
	})
}

// TestPublishIdempotencyKey: parallel publishes with one key make one
// message; the key holds for 24 h and is free again after.
func TestPublishIdempotencyKey(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		clock := newFakeClock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, Now: clock.Now})
		ctx := context.Background()
		rcv := newReceiver(t, always(http.StatusNoContent))
		appID, _ := e.newApp(t, rcv.URL)
		other, _ := e.newApp(t, rcv.URL)
		declareInvoice(t, e)
		good := json.RawMessage(`{"invoice_no":"I-9","lines":[]}`)

		const parallel = 8
		ids := make([]string, parallel)
		var wg sync.WaitGroup
		for i := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "same-key")
				if err != nil {
					t.Errorf("publish %d: %v", i, err)
					return
				}
				ids[i] = m.ID
			}()
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("parallel publishes with one key returned messages %v", ids)
			}
		}
		count := func(app int) int {
			n, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.AppID(app), webhookdelivery.EventType("invoice.issued")).Count(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count(appID); n != 1 {
			t.Fatalf("%d deliveries after %d parallel publishes with one key, want 1", n, parallel)
		}
		// A key is the app's own: another app's publish with it is new.
		if m, err := e.svc.Publish(ctx, other, "invoice.issued", good, "same-key"); err != nil || m.Replayed || count(other) != 1 {
			t.Fatalf("the key for another app: %+v %v", m, err)
		}

		clock.Advance(webhook.IdempotencyWindow - time.Second)
		if m, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "same-key"); err != nil || !m.Replayed || m.ID != ids[0] {
			t.Fatalf("within 24 h: %+v %v", m, err)
		}
		clock.Advance(2 * time.Second)
		m, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "same-key")
		if err != nil || m.Replayed || m.ID == ids[0] || count(appID) != 2 {
			t.Fatalf("after 24 h: %+v %v, %d deliveries", m, err, count(appID))
		}
		if again, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "same-key"); err != nil || !again.Replayed || again.ID != m.ID {
			t.Fatalf("the renewed key: %+v %v", again, err)
		}
	})
}

// TestSendTestOfAType: sendTestWebhook with an event type sends that
// type's example as an event of the type (built-in or custom); an unknown
// type, or a custom one without an example, is refused; the example's
// waiting copies are capped like webhook.test.
func TestSendTestOfAType(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(http.StatusNoContent))
		appID, _ := e.newApp(t, rcv.URL)
		declareInvoice(t, e)
		if _, err := e.svc.CreateEventType(ctx, "invoice.voided", "An invoice was voided.", json.RawMessage(`{"type":"object"}`), nil); err != nil {
			t.Fatal(err)
		}
		paidType, err := e.svc.EventType(ctx, order.EventPaid)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			typ     string
			example string
		}{
			{order.EventPaid, string(paidType.Example)},
			{"invoice.issued", `{"invoice_no":"INV-1","lines":[{"sku":"A-1","qty":2}]}`},
		} {
			d, err := e.svc.SendTest(ctx, appID, 0, c.typ)
			if err != nil {
				t.Fatalf("%s: %v", c.typ, err)
			}
			e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
			if d.EventType != c.typ || d.BizData != c.example {
				t.Errorf("test of %s: %s %s", c.typ, d.EventType, d.BizData)
			}
		}
		if _, err := e.svc.SendTest(ctx, appID, 0, "invoice.voided"); !errors.Is(err, webhook.ErrInvalidState) {
			t.Errorf("a type without an example: %v", err)
		}
		if _, err := e.svc.SendTest(ctx, appID, 0, "nothing.here"); !errors.Is(err, catalogue.ErrTypeNotFound) {
			t.Errorf("an unknown type: %v", err)
		}
		// The cap counts waiting copies of the example.
		down, _ := e.newApp(t, "http://127.0.0.1:1/refused")
		for range webhook.MaxWaitingTests {
			if _, err := e.svc.SendTest(ctx, down, 0, order.EventPaid); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.svc.SendTest(ctx, down, 0, order.EventPaid); errs.KindOf(err) != errs.Conflict {
			t.Errorf("test %d of one example: %v, want a conflict", webhook.MaxWaitingTests+1, err)
		}
		if _, err := e.svc.SendTest(ctx, down, 0, ""); err != nil {
			t.Errorf("a webhook.test beside them: %v", err)
		}
	})
}

// TestPublishFansOut: a published event goes to every enabled endpoint of
// the app subscribed to its type — one message, one delivery each, one
// webhook-id — and its repeat with the same key sends nothing new.
func TestPublishFansOut(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(http.StatusNoContent))
		appID, _ := e.newApp(t, "")
		all, _ := e.endpoint(t, appID, rcv.URL+"/all")
		invoices, _ := e.endpoint(t, appID, rcv.URL+"/invoices", "invoice.issued")
		e.endpoint(t, appID, rcv.URL+"/orders", order.EventPaid)
		declareInvoice(t, e)
		good := json.RawMessage(`{"invoice_no":"I-5","lines":[{"sku":"A","qty":1}]}`)

		m, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "fan-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Deliveries) != 2 || m.Deliveries[0].EventID != m.ID || m.Deliveries[1].EventID != m.ID ||
			*m.Deliveries[0].EndpointID != all || *m.Deliveries[1].EndpointID != invoices {
			t.Fatalf("fan-out: %+v", m.Deliveries)
		}
		for _, d := range m.Deliveries {
			e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		}
		again, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "fan-1")
		if err != nil || !again.Replayed || len(again.Deliveries) != 2 {
			t.Fatalf("repeat: %+v %v", again, err)
		}
		n, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.AppID(appID)).Count(ctx)
		if err != nil || n != 2 || rcv.count() != 2 {
			t.Fatalf("%d deliveries (%v), %d received; want 2 and 2", n, err, rcv.count())
		}
		ids := map[string]bool{}
		for _, r := range rcv.requests() {
			ids[r.header.Get("webhook-id")] = true
		}
		if len(ids) != 1 || !ids[m.ID] {
			t.Errorf("webhook-ids %v, want only %s", ids, m.ID)
		}
	})
}

// TestCustomTypeCapUnderConcurrency: declarations racing for the
// catalogue's last places, on two replicas, never take it past
// MaxCustomTypes: exactly as many succeed as there were places, the others
// are INVALID_STATE (the count and the insert were two steps).
func TestCustomTypeCapUnderConcurrency(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{})
		ctx := context.Background()
		const free = 3
		now := time.Now().UTC()
		var fill []*ent.WebhookEventTypeCreate
		for i := range catalogue.MaxCustomTypes - free {
			fill = append(fill, e.db.Client.WebhookEventType.Create().SetName(fmt.Sprintf("filler.t%d", i)).
				SetDescription("filler").SetSchema(`{"type":"object"}`).SetCreateTime(now))
		}
		for len(fill) > 0 { // in batches within SQLite's bound on parameters
			n := min(len(fill), 200)
			e.db.Client.WebhookEventType.CreateBulk(fill[:n]...).ExecX(ctx)
			fill = fill[n:]
		}
		replicas := []*webhook.Service{e.svc, e.startService(t, storetest.OpenURL(t, e.url))}
		const racers = 12
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ok, full int
		var other []error
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				_, err := replicas[i%2].CreateEventType(ctx, fmt.Sprintf("race.t%d", i), "A racer.", json.RawMessage(`{"type":"object"}`), nil)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errs.KindOf(err) == errs.InvalidState:
					full++
				default:
					other = append(other, err)
				}
			})
		}
		close(start)
		wg.Wait()
		n := e.db.Client.WebhookEventType.Query().CountX(ctx)
		if ok != free || full != racers-free || len(other) > 0 || n != catalogue.MaxCustomTypes {
			t.Fatalf("%d declarations succeeded, %d were refused as full, other errors %v; the catalogue holds %d custom types, want %d, %d and none; at most %d",
				ok, full, other, n, free, racers-free, catalogue.MaxCustomTypes)
		}
	})
}
