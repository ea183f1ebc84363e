package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// TestPublishGroupRoundTrips: on Postgres a group of publishes is two
// round trips (two pgx batches, no statement of its own) whatever its
// events: new keys, a key repeated within the group, an app that does
// not exist (its events fail alone, and the upsert skips its keys); a
// key taken by an earlier message adds one read of the keys. The
// statements are counted from the pgx spans of the group's trace
// (preparations, made once per connection, are not round trips of the
// group and are not counted).
func TestPublishGroupRoundTrips(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("Postgres only: SQLite writes through Ent")
		}
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(200))
		appID, _ := e.newApp(t, rcv.URL)
		if err := e.db.PartnerApp.UpdateOneID(appID).SetStatus(0).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		declareInvoice(t, e)
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		traced, err := store.Open(ctx, e.url, store.WithTracing(tp))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { traced.Close() })
		svc := e.startService(t, traced)

		good := json.RawMessage(`{"invoice_no":"I-7","lines":[{"sku":"A-1","qty":3}]}`)
		req := func(app int, key string) webhook.PublishRequest {
			return webhook.PublishRequest{AppID: app, EventType: "invoice.issued", BizData: good, IdempotencyKey: key}
		}
		// publish runs reqs as one group in a trace of its own and
		// returns the results, the group's batches and its statements
		// sent alone (not in a batch).
		publish := func(reqs ...webhook.PublishRequest) ([]webhook.PublishResult, int, int) {
			t.Helper()
			gctx, span := tp.Tracer("test").Start(ctx, "group")
			res, err := svc.PublishEvents(gctx, reqs)
			span.End()
			if err != nil {
				t.Fatal(err)
			}
			var queries []sdktrace.ReadOnlySpan
			batches := map[trace.SpanID]bool{}
			for _, s := range spans.GetSpans().Snapshots() {
				if s.SpanContext().TraceID() != span.SpanContext().TraceID() {
					continue
				}
				switch name := s.Name(); {
				case name == "batch start":
					batches[s.SpanContext().SpanID()] = true
				case strings.HasPrefix(name, "query "):
					queries = append(queries, s)
				}
			}
			alone := 0
			for _, q := range queries {
				if !batches[q.Parent().SpanID()] {
					alone++
				}
			}
			return res, len(batches), alone
		}

		// A first publish reads the type's schema into the catalogue.
		if _, err := svc.PublishEvents(ctx, []webhook.PublishRequest{req(appID, "")}); err != nil {
			t.Fatal(err)
		}
		missing := appID + 1000
		res, batches, alone := publish(req(appID, "rt-1"), req(missing, "rt-1"), req(appID, "rt-1"), req(appID, ""), req(missing, ""))
		if batches != 2 || alone != 0 {
			t.Errorf("a new group: %d batches and %d statements alone, want 2 and 0", batches, alone)
		}
		first := res[0].Message
		if res[0].Err != nil || first.Replayed || first.DeliveryCount != 1 {
			t.Fatalf("new key: %+v", res[0])
		}
		for _, i := range []int{1, 4} {
			if !errors.Is(res[i].Err, webhook.ErrAppNotFound) || res[i].Message != nil {
				t.Errorf("event %d of an unknown app: %+v", i, res[i])
			}
		}
		if m := res[2].Message; res[2].Err != nil || !m.Replayed || m.ID != first.ID || m.DeliveryCount != 0 {
			t.Errorf("key repeated in the group: %+v", res[2])
		}
		if m := res[3].Message; res[3].Err != nil || m.Replayed || m.DeliveryCount != 1 || m.ID == first.ID {
			t.Errorf("no key: %+v", res[3])
		}

		res, batches, alone = publish(req(appID, "rt-1"), req(appID, "rt-2"), req(missing, "rt-1"))
		if batches != 2 || alone != 1 {
			t.Errorf("a group with a repeat: %d batches and %d statements alone, want 2 and 1 (the keys' read)", batches, alone)
		}
		if m := res[0].Message; res[0].Err != nil || !m.Replayed || m.ID != first.ID {
			t.Errorf("repeat of an earlier message: %+v", res[0])
		}
		if m := res[1].Message; res[1].Err != nil || m.Replayed || m.DeliveryCount != 1 {
			t.Errorf("new key beside a repeat: %+v", res[1])
		}
		if !errors.Is(res[2].Err, webhook.ErrAppNotFound) {
			t.Errorf("unknown app beside a repeat: %+v", res[2])
		}
		// The rows: one message per key, and none for the unknown app.
		n, err := e.db.WebhookPublication.Query().Count(ctx)
		if err != nil || n != 2 {
			t.Errorf("publication rows = %d (%v), want 2", n, err)
		}
	})
}
