package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/hook"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook/dispatch"
)

type payEnv struct {
	db       *store.DB
	orders   *order.Service
	partners *partner.Service
}

func newPayEnv(t *testing.T, b testenv.Backend) *payEnv {
	t.Helper()
	url := b.DatabaseURL
	if b.Embedded() {
		url = "sqlite:" + filepath.Join(t.TempDir(), "gatehouse.db")
	}
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ps, err := partner.NewService(db.Client, secret.RandomBytes(32))
	if err != nil {
		t.Fatal(err)
	}
	return &payEnv{db: db, orders: order.NewService(db), partners: ps}
}

func (e *payEnv) order(t *testing.T, callback string, st order.Status) order.Order {
	t.Helper()
	ctx := context.Background()
	app, _, err := e.partners.Create(ctx, partner.CreateInput{AppName: "shop", CallbackURL: callback})
	if err != nil {
		t.Fatal(err)
	}
	o, err := e.orders.Create(ctx, order.CreateInput{AppID: app.ID, OrderNo: "SO-" + testenv.RandomSuffix(), Amount: "12.30", Status: st})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (e *payEnv) deliveries(t *testing.T, appID int) []*ent.WebhookDelivery {
	t.Helper()
	ds, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.AppID(appID)).All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestPayMarksPaidAndQueuesWebhookAtomically(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newPayEnv(t, b)
		ctx := context.Background()
		const cb = "https://partner.example.com/hooks"
		o := e.order(t, cb, "")
		before := time.Now().Add(-time.Second)

		paid, err := e.orders.Pay(ctx, o.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		if paid.Status != order.Paid || paid.PayTime == nil || paid.PayTime.Before(before) {
			t.Fatalf("paid order: status %s pay_time %v", paid.Status, paid.PayTime)
		}
		ds := e.deliveries(t, o.AppID)
		if len(ds) != 1 {
			t.Fatalf("%d deliveries queued, want 1", len(ds))
		}
		d := ds[0]
		if d.EventType != order.EventPaid || d.Status != dispatch.StatusPending || d.CallbackURL != cb ||
			d.RetryCount != 0 || d.MaxRetry != 5 || d.LeaseUntil != nil || time.Until(d.NextAttemptAt) > 0 {
			t.Errorf("delivery = %+v", d)
		}
		var biz map[string]any
		if err := json.Unmarshal([]byte(d.BizData), &biz); err != nil {
			t.Fatal(err)
		}
		if biz["order_no"] != o.OrderNo || biz["amount"] != 12.3 || biz["status"] != "PAID" || biz["pay_time"] != paid.PayTime.UTC().Format(order.TimeFormat) {
			t.Errorf("bizData = %s", d.BizData)
		}

		// Paying again, or an order in another state, is refused; nothing is queued.
		if _, err := e.orders.Pay(ctx, o.OrderNo); !errors.Is(err, order.ErrInvalidState) {
			t.Errorf("second Pay: %v, want ErrInvalidState", err)
		}
		if _, err := e.orders.Pay(ctx, "no-such-order"); !errors.Is(err, order.ErrNotFound) {
			t.Errorf("Pay of an unknown order: %v, want ErrNotFound", err)
		}
		for _, st := range []order.Status{order.Cancelled, order.Refunded} {
			other := e.order(t, cb, st)
			if _, err := e.orders.Pay(ctx, other.OrderNo); !errors.Is(err, order.ErrInvalidState) {
				t.Errorf("Pay of a %s order: %v, want ErrInvalidState", st, err)
			}
			if n := len(e.deliveries(t, other.AppID)); n != 0 {
				t.Errorf("Pay of a %s order queued %d deliveries", st, n)
			}
		}
		if n := len(e.deliveries(t, o.AppID)); n != 1 {
			t.Errorf("%d deliveries after the refused Pay, want 1", n)
		}
	})
}

// An app without a callback URL: the order is paid, no webhook is queued.
func TestPayWithoutCallbackURLQueuesNothing(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newPayEnv(t, b)
		o := e.order(t, "", "")
		paid, err := e.orders.Pay(context.Background(), o.OrderNo)
		if err != nil || paid.Status != order.Paid {
			t.Fatalf("Pay = %v, %v", paid, err)
		}
		if n := len(e.deliveries(t, o.AppID)); n != 0 {
			t.Errorf("%d deliveries queued for an app without a callback URL", n)
		}
	})
}

// When the webhook row cannot be written, the payment is rolled back too.
func TestPayRollsBackWhenTheWebhookCannotBeQueued(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newPayEnv(t, b)
		o := e.order(t, "https://partner.example.com/hooks", "")
		boom := errors.New("outbox unavailable")
		e.db.WebhookDelivery.Use(func(next ent.Mutator) ent.Mutator {
			return hook.WebhookDeliveryFunc(func(context.Context, *ent.WebhookDeliveryMutation) (ent.Value, error) {
				return nil, boom
			})
		})
		if _, err := e.orders.Pay(context.Background(), o.OrderNo); !errors.Is(err, boom) {
			t.Fatalf("Pay = %v, want the outbox error", err)
		}
		got, err := e.orders.Get(context.Background(), o.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != order.Created || got.PayTime != nil {
			t.Errorf("order after a failed Pay: %s, pay_time %v; want CREATED without pay time", got.Status, got.PayTime)
		}
	})
}

// Concurrent payments of one order: exactly one wins, one webhook.
func TestConcurrentPayPaysOnce(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newPayEnv(t, b)
		o := e.order(t, "https://partner.example.com/hooks", "")
		const n = 8
		var (
			wg            sync.WaitGroup
			mu            sync.Mutex
			wins, refused int
			others        []error
		)
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := e.orders.Pay(context.Background(), o.OrderNo)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, order.ErrInvalidState):
					refused++
				default:
					others = append(others, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins != 1 || refused != n-1 || len(others) != 0 {
			t.Errorf("%d paid, %d refused, other errors %v; want 1 and %d", wins, refused, others, n-1)
		}
		if c := len(e.deliveries(t, o.AppID)); c != 1 {
			t.Errorf("%d deliveries queued, want 1", c)
		}
	})
}
