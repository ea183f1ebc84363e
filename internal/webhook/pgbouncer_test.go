package webhook_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/sender"
)

// TestWakeUpThroughPgBouncer: two replicas reach Postgres through
// PgBouncer in transaction mode. Replica A queues a delivery (its
// dispatcher does not run); replica B must attempt it.
//
//   - With a direct URL, B LISTENs on a session connection to the server
//     and A's NOTIFY (sent through the pooler at commit) wakes it: with a
//     poll interval of an hour nothing else could deliver it.
//   - Without one, B has no session to LISTEN on: it polls every 500 ms
//     and finds the delivery; nothing LISTENs through the pooler (which
//     would log "got packet 'A' from server when not linked" and lose the
//     notification).
func TestWakeUpThroughPgBouncer(t *testing.T) {
	bouncer := fleet.StartPgBouncer(t, "transaction")
	for _, c := range []struct {
		name   string
		direct bool
		poll   time.Duration // B's Options.PollInterval
	}{
		{"direct URL", true, time.Hour},
		{"no direct URL", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			direct := testenv.PostgresURL(t)
			pooled := bouncer.URL(t, direct)
			opt := withSettings(webhook.Options{AllowPrivate: true, PollInterval: c.poll})
			e := &env{url: pooled, masterKey: secret.RandomBytes(32), logs: &syncBuffer{}, opt: opt}

			var opts []store.Option
			if c.direct {
				opts = append(opts, store.WithDirectURL(direct))
			}
			dbB, err := store.Open(t.Context(), pooled, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dbB.Close() })
			if err := dbB.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			if dbB.CanListen() != c.direct {
				t.Fatalf("replica B CanListen %v, want %v", dbB.CanListen(), c.direct)
			}
			svcB := e.startService(t, dbB)
			if want := map[bool]time.Duration{true: time.Hour, false: webhook.PollWithoutListen}[c.direct]; svcB.PollInterval() != want {
				t.Fatalf("replica B polls every %s, want %s", svcB.PollInterval(), want)
			}

			// Replica A: the services that queue work, and the webhook
			// service's hooks that announce it, but no dispatcher.
			dbA, err := store.Open(t.Context(), pooled)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dbA.Close() })
			e.db = dbA
			svcA, err := webhook.NewService(dbA, e.masterKey, slog.New(slog.DiscardHandler), opt)
			if err != nil {
				t.Fatal(err)
			}
			svcA.WakeOnCommit(dbA.Client)
			if e.partners, err = partner.NewService(dbA.Client, e.masterKey, partner.WithWebhookSecretGen(sender.NewSecret)); err != nil {
				t.Fatal(err)
			}
			e.orders = order.NewService(dbA)

			rcv := newReceiver(t, always(200))
			appID, _ := e.newApp(t, rcv.URL)
			for i := range 3 {
				d := e.pay(t, appID)
				waitFor(t, 15*time.Second, func() bool { return rcv.count() == i+1 },
					func() string { return "the delivery queued on replica A was not attempted by replica B" })
				at := rcv.requests()[i].at
				t.Logf("queued on A → attempted by B: %s", at.Sub(d.CreateTime))
				if lag := at.Sub(d.CreateTime); lag > 5*time.Second {
					t.Errorf("attempted %s after it was queued", lag)
				}
			}
			if log := bouncer.Log(); strings.Contains(log, "got packet 'A'") {
				t.Fatalf("something LISTENed through the pooler:\n%s", log)
			}
		})
	}
}

// TestPublishGroupsThroughPgBouncer: a group of publishes on Postgres is
// two pgx batches opened by BEGIN and closed by COMMIT; through PgBouncer
// in transaction mode (statements described, nothing prepared by name)
// concurrent groups still queue one message per idempotency key, repeats
// included, and leave no server connection in a transaction.
func TestPublishGroupsThroughPgBouncer(t *testing.T) {
	bouncer := fleet.StartPgBouncer(t, "transaction")
	direct := testenv.PostgresURL(t)
	pooled := bouncer.URL(t, direct)
	e := &env{url: pooled, masterKey: secret.RandomBytes(32), logs: &syncBuffer{}, opt: withSettings(webhook.Options{AllowPrivate: true})}
	db, err := store.Open(t.Context(), pooled)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.db = db
	svc := e.startService(t, db)
	if e.partners, err = partner.NewService(db.Client, e.masterKey, partner.WithWebhookSecretGen(sender.NewSecret)); err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	rcv := newReceiver(t, always(200))
	appID, _ := e.newApp(t, rcv.URL)
	if err := db.PartnerApp.UpdateOneID(appID).SetStatus(0).Exec(t.Context()); err != nil {
		t.Fatal(err) // held: the figure is the publish, not the delivery
	}
	declareInvoice(t, e)
	body := json.RawMessage(`{"invoice_no":"I-7","lines":[{"sku":"A-1","qty":3}]}`)

	const n = 48 // 24 keys, each published twice, at once
	ids := make([]string, n)
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			m, err := svc.PublishShared(t.Context(), webhook.PublishRequest{AppID: appID, EventType: "invoice.issued",
				BizData: body, IdempotencyKey: fmt.Sprintf("pgb-%d", i/2)})
			if err != nil {
				errc <- err
				return
			}
			ids[i] = m.ID
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("publish through PgBouncer: %v\npgbouncer: %s", err, bouncer.Log())
	}
	for i := 0; i < n; i += 2 {
		if ids[i] != ids[i+1] {
			t.Fatalf("key pgb-%d answered two messages: %s and %s", i/2, ids[i], ids[i+1])
		}
	}
	deliveries, err := db.WebhookDelivery.Query().Count(t.Context())
	if err != nil || deliveries != n/2 {
		t.Fatalf("deliveries queued = %d (%v), want %d: one per key", deliveries, err, n/2)
	}
	// No server connection was left inside a transaction.
	conn, err := pgx.Connect(t.Context(), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var open int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Fatalf("%d server connections left idle in a transaction", open)
	}
}
