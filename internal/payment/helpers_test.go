package payment_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/kv"
	"gatehouse/internal/order"
	"gatehouse/internal/outbound"
	"gatehouse/internal/payment"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// env is one backend (SQLite + memory, or Postgres + Redis) with a partner
// app, and a test provider on loopback.
type env struct {
	db       *store.DB
	kv       kv.Store
	orders   *order.Service
	provider *paymenttest.Provider
	appID    int
	clock    *testenv.Clock
}

func newEnv(t *testing.T, b testenv.Backend) *env {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, b)
	store, err := kv.Open(ctx, b.RedisURL, kv.WithPrefix(b.KeyPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	app := db.PartnerApp.Create().SetAppName("shop").SetAppKey("shop-" + testenv.RandomSuffix()).
		SetSecret([]byte{1}).SetCallbackURL("https://partner.example.com/hooks").SaveX(ctx)
	if err := webhook.SyncFirstEndpoint(ctx, db.Client, app.ID); err != nil { // the callback URL's endpoint
		t.Fatal(err)
	}
	return &env{
		db: db, kv: store, orders: order.NewService(db), provider: paymenttest.New(t), appID: app.ID,
		clock: testenv.NewClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)),
	}
}

// fastConfig is the production outbound configuration with short retry waits.
func fastConfig() outbound.Config {
	c := outbound.DefaultConfig()
	c.RetryWaits = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}
	return c
}

// service builds a payment service over e (a new one is what a restarted
// process would have: its own client and breaker, the same database and
// kv store).
func (e *env) service(t *testing.T, cfg outbound.Config, opts ...outbound.Option) (*payment.Service, *outbound.Client) {
	t.Helper()
	client, err := outbound.New(cfg, append([]outbound.Option{outbound.WithClock(e.clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	p := payment.Provider{URL: e.provider.URL, APIKey: e.provider.APIKey, Secret: []byte(e.provider.Secret)}
	return payment.NewService(e.orders, e.kv, client, p, slog.New(slog.NewTextHandler(io.Discard, nil))), client
}

// order creates an order of 99.90 in status st.
func (e *env) order(t *testing.T, st order.Status) string {
	t.Helper()
	o, err := e.orders.Create(context.Background(), order.CreateInput{AppID: e.appID, OrderNo: "SO-" + testenv.RandomSuffix(), Amount: "99.90", Status: st})
	if err != nil {
		t.Fatal(err)
	}
	return o.OrderNo
}

func (e *env) status(t *testing.T, orderNo string) order.Status {
	t.Helper()
	o, err := e.orders.Get(context.Background(), orderNo)
	if err != nil {
		t.Fatal(err)
	}
	return o.Status
}

// events returns the webhook deliveries queued of type eventType.
func (e *env) events(t *testing.T, eventType string) []*ent.WebhookDelivery {
	t.Helper()
	ds, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.EventType(eventType)).All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// noProblems fails the test when the provider saw an incorrect request.
func (e *env) noProblems(t *testing.T) {
	t.Helper()
	for _, p := range e.provider.Problems() {
		t.Error(p)
	}
}
