package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"gatehouse/ent"
	"gatehouse/ent/hook"
	"gatehouse/internal/order"
	"gatehouse/internal/testenv"
)

// TestCancel: CREATED → CANCELLED with its order.cancelled webhook in the
// same transaction; other states are refused; a failed outbox write rolls
// the cancellation back.
func TestCancel(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newPayEnv(t, b)
		ctx := context.Background()
		o := e.order(t, "https://partner.example.com/hooks", "")
		got, err := e.orders.Cancel(ctx, o.OrderNo)
		if err != nil || got.Status != order.Cancelled || got.PayTime != nil {
			t.Fatalf("Cancel = %v, %v", got, err)
		}
		ds := e.deliveries(t, o.AppID)
		if len(ds) != 1 || ds[0].EventType != order.EventCancelled {
			t.Fatalf("deliveries %v", ds)
		}
		var biz map[string]any
		if err := json.Unmarshal([]byte(ds[0].BizData), &biz); err != nil {
			t.Fatal(err)
		}
		if biz["order_no"] != o.OrderNo || biz["status"] != "CANCELLED" || biz["amount"] != 12.3 || biz["cancel_time"] == "" || biz["create_time"] == "" {
			t.Errorf("bizData %s", ds[0].BizData)
		}
		for _, st := range []order.Status{order.Cancelled, order.Paid, order.Refunded} {
			other := e.order(t, "https://partner.example.com/hooks", st)
			if _, err := e.orders.Cancel(ctx, other.OrderNo); !errors.Is(err, order.ErrInvalidState) {
				t.Errorf("Cancel of a %s order: %v", st, err)
			}
		}
		if _, err := e.orders.Cancel(ctx, "no-such-order"); !errors.Is(err, order.ErrNotFound) {
			t.Errorf("Cancel of an unknown order: %v", err)
		}

		boom := errors.New("outbox unavailable")
		victim := e.order(t, "https://partner.example.com/hooks", "")
		e.db.WebhookDelivery.Use(func(next ent.Mutator) ent.Mutator {
			return hook.WebhookDeliveryFunc(func(context.Context, *ent.WebhookDeliveryMutation) (ent.Value, error) { return nil, boom })
		})
		if _, err := e.orders.Cancel(ctx, victim.OrderNo); !errors.Is(err, boom) {
			t.Fatalf("Cancel with a failing outbox: %v", err)
		}
		if cur, _ := e.orders.Get(ctx, victim.OrderNo); cur.Status != order.Created {
			t.Errorf("order %s after the rolled-back Cancel", cur.Status)
		}
	})
}

// TestCompleteRefund: PAID → REFUNDED with order.refunded once; completing
// again returns the order without a second webhook; only PAID orders move.
func TestCompleteRefund(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newPayEnv(t, b)
		ctx := context.Background()
		o := e.order(t, "https://partner.example.com/hooks", order.Paid)
		for range 2 {
			got, err := e.orders.CompleteRefund(ctx, o.OrderNo, "returned")
			if err != nil || got.Status != order.Refunded {
				t.Fatalf("CompleteRefund = %v, %v", got, err)
			}
		}
		ds := e.deliveries(t, o.AppID)
		if len(ds) != 1 || ds[0].EventType != order.EventRefunded {
			t.Fatalf("deliveries %v", ds)
		}
		var biz map[string]any
		if err := json.Unmarshal([]byte(ds[0].BizData), &biz); err != nil {
			t.Fatal(err)
		}
		if biz["status"] != "REFUNDED" || biz["reason"] != "returned" || biz["refund_time"] == "" || biz["pay_time"] == "" {
			t.Errorf("bizData %s", ds[0].BizData)
		}
		for _, st := range []order.Status{order.Created, order.Cancelled} {
			other := e.order(t, "", st)
			if _, err := e.orders.CompleteRefund(ctx, other.OrderNo, ""); !errors.Is(err, order.ErrInvalidState) {
				t.Errorf("CompleteRefund of a %s order: %v", st, err)
			}
		}
		if _, err := e.orders.CompleteRefund(ctx, "no-such-order", ""); !errors.Is(err, order.ErrNotFound) {
			t.Errorf("unknown order: %v", err)
		}
	})
}
