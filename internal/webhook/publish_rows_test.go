package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookpublication"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestPublishEventsRows: a batch's rows (written in one statement per
// table on Postgres) are those a single Publish writes, column by column;
// its keys answer repeats within the batch and of earlier messages, and a
// key past its window is taken over by the batch's new message.
func TestPublishEventsRows(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		clock := newFakeClock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, Now: clock.Now})
		ctx := context.Background()
		rcv := newReceiver(t, always(200))
		appID, _ := e.newApp(t, rcv.URL)
		// Held: the rows stay as they were queued.
		if err := e.db.PartnerApp.UpdateOneID(appID).SetStatus(0).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		declareInvoice(t, e)
		good := json.RawMessage(`{"invoice_no":"I-7","lines":[{"sku":"A-1","qty":3}]}`)
		single, err := e.svc.Publish(ctx, appID, "invoice.issued", good, "k-single")
		if err != nil {
			t.Fatal(err)
		}
		req := func(key string) webhook.PublishRequest {
			return webhook.PublishRequest{AppID: appID, EventType: "invoice.issued", BizData: good, IdempotencyKey: key}
		}
		res, err := e.svc.PublishEvents(ctx, []webhook.PublishRequest{req("k-batch"), req(""), req("k-single"), req("k-batch")})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Message == nil {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
		first, plain, repeat, dup := res[0].Message, res[1].Message, res[2].Message, res[3].Message
		if first.Replayed || plain.Replayed || first.DeliveryCount != 1 || plain.DeliveryCount != 1 {
			t.Fatalf("new messages: %+v %+v", first, plain)
		}
		if !repeat.Replayed || repeat.ID != single.ID || !dup.Replayed || dup.ID != first.ID || dup.DeliveryCount != 0 {
			t.Fatalf("repeats: %+v %+v", repeat, dup)
		}
		want := deliveryOf(t, e.db.Client, single.ID)
		for _, m := range []*webhook.Published{first, plain} {
			got := deliveryOf(t, e.db.Client, m.ID)
			// Publish queues at the wall clock's time (Fanout), a batch
			// at the service's.
			if now := clock.Now(); !got.NextAttemptAt.Equal(now) || !got.CreateTime.Equal(now) || !got.UpdateTime.Equal(now) {
				t.Errorf("the batch's delivery of %s is not queued at %v: %+v", m.ID, now, got)
			}
			if d := sameDelivery(want, got); d != "" {
				t.Errorf("the batch's delivery of %s differs from a single publish's in %s:\n%+v\n%+v", m.ID, d, got, want)
			}
		}
		pub := publicationOf(t, e.db.Client, appID, "k-batch")
		if pub.EventID != first.ID || pub.EventType != "invoice.issued" || pub.BizData != string(good) || !pub.CreateTime.Equal(clock.Now()) {
			t.Fatalf("the batch's key row: %+v", pub)
		}

		// Past the window, the key is the next message's.
		clock.Advance(webhook.IdempotencyWindow + time.Second)
		res, err = e.svc.PublishEvents(ctx, []webhook.PublishRequest{req("k-batch")})
		if err != nil || res[0].Err != nil || res[0].Message.Replayed || res[0].Message.ID == first.ID {
			t.Fatalf("a key past its window: %+v %v", res, err)
		}
		if pub := publicationOf(t, e.db.Client, appID, "k-batch"); pub.EventID != res[0].Message.ID || !pub.CreateTime.Equal(clock.Now()) {
			t.Fatalf("the key row taken over: %+v", pub)
		}
	})
}

func deliveryOf(t *testing.T, c *ent.Client, eventID string) *ent.WebhookDelivery {
	t.Helper()
	d, err := c.WebhookDelivery.Query().Where(webhookdelivery.EventID(eventID)).Only(context.Background())
	if err != nil {
		t.Fatalf("the delivery of %s: %v", eventID, err)
	}
	return d
}

func publicationOf(t *testing.T, c *ent.Client, appID int, key string) *ent.WebhookPublication {
	t.Helper()
	p, err := c.WebhookPublication.Query().
		Where(webhookpublication.AppID(appID), webhookpublication.IdempotencyKey(key)).Only(context.Background())
	if err != nil {
		t.Fatalf("the row of key %s: %v", key, err)
	}
	return p
}

// sameDelivery names the first column (other than the id, the event id
// and the times) in which a and b differ, "" when none.
func sameDelivery(a, b *ent.WebhookDelivery) string {
	switch {
	case a.AppID != b.AppID:
		return "app_id"
	case a.EndpointID == nil || b.EndpointID == nil || *a.EndpointID != *b.EndpointID:
		return "endpoint_id"
	case a.EventType != b.EventType:
		return "event_type"
	case a.BizData != b.BizData:
		return "biz_data"
	case a.CallbackURL != b.CallbackURL:
		return "callback_url"
	case a.Status != b.Status:
		return "status"
	case a.RetryCount != b.RetryCount || a.AttemptCount != b.AttemptCount || a.MaxRetry != b.MaxRetry:
		return "retry_count, attempt_count or max_retry"
	case a.LeaseUntil != nil || b.LeaseUntil != nil:
		return "lease_until"
	case a.LastError != b.LastError:
		return "last_error"
	case a.Traceparent != b.Traceparent || a.Tracestate != b.Tracestate:
		return "trace context"
	}
	return ""
}

// TestPublishEventsNotify: on Postgres a group that queued deliveries
// announces them with one NOTIFY at its commit (other replicas attempt
// them at once); a group of repeats only queues nothing and stays quiet.
func TestPublishEventsNotify(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("Postgres only: LISTEN/NOTIFY")
		}
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(200))
		appID, _ := e.newApp(t, rcv.URL)
		declareInvoice(t, e)
		conn, err := pgx.Connect(ctx, b.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "LISTEN "+dispatch.NotifyChannel); err != nil {
			t.Fatal(err)
		}
		good := json.RawMessage(`{"invoice_no":"I-8","lines":[]}`)
		reqs := make([]webhook.PublishRequest, 20)
		for i := range reqs {
			reqs[i] = webhook.PublishRequest{AppID: appID, EventType: "invoice.issued", BizData: good, IdempotencyKey: fmt.Sprintf("n-%d", i)}
		}
		notified := func() int {
			n := 0
			for {
				wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				_, err := conn.WaitForNotification(wctx)
				cancel()
				if err != nil {
					return n
				}
				n++
			}
		}
		if _, err := e.svc.PublishEvents(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		if n := notified(); n != 1 {
			t.Fatalf("a batch of 20 new events sent %d notifications, want 1", n)
		}
		if _, err := e.svc.PublishEvents(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		if n := notified(); n != 0 {
			t.Fatalf("a batch of repeats sent %d notifications, want 0", n)
		}
	})
}
