package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gatehouse/ent"
	entorder "gatehouse/ent/order"
	"gatehouse/internal/store"
	"gatehouse/internal/webhook"
)

// transition is one move of the order state machine:
//
//	CREATED ─pay─► PAID ─refund─► REFUNDED
//	   └──cancel─► CANCELLED
//
// Each move queues its webhook event in the transaction that changes the
// status.
type transition struct {
	from, to Status
	// verb completes "only CREATED orders can be …" in errors.
	verb string
	// set adds the move's other fields to the update (now is the move's time).
	set func(u *ent.OrderUpdate, now time.Time)
	// queue queues the move's webhook for o, as it is after the move,
	// through c, the transaction's client.
	queue func(ctx context.Context, c *ent.Client, o *ent.Order, now time.Time) error
}

// move applies t to order orderNo in one transaction: the status change
// and its webhook commit together or not at all, and the caller never
// waits for the delivery. An app without a callback URL gets no webhook
// (there is nowhere to send it).
//
// Unknown order: ErrNotFound. Any status but t.from, including losing a
// race with a concurrent move: ErrInvalidState.
func (s *Service) move(ctx context.Context, orderNo string, t transition) (*ent.Order, error) {
	var moved *ent.Order
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		o, err := tx.Order.Query().Where(entorder.OrderNo(orderNo)).Only(ctx)
		if ent.IsNotFound(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if o.Status != t.from {
			return fmt.Errorf("%w: order %s is %s, only %s orders can be %s", ErrInvalidState, orderNo, o.Status, t.from, t.verb)
		}
		now := s.now().UTC().Truncate(time.Millisecond)
		// The status condition makes a concurrent move that read the same
		// status update nothing (Postgres re-checks it after the first commit).
		u := tx.Order.Update().Where(entorder.ID(o.ID), entorder.StatusEQ(t.from)).SetStatus(t.to)
		if t.set != nil {
			t.set(u, now)
		}
		n, err := u.Save(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: order %s changed concurrently", ErrInvalidState, orderNo)
		}
		if moved, err = tx.Order.Get(ctx, o.ID); err != nil {
			return err
		}
		return t.queue(ctx, tx.Client(), moved, now)
	})
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidState) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s order %s: %w", t.verb, orderNo, err)
	}
	return moved.Unwrap(), nil
}

// queueEvent marshals an event's bizData and queues it for o's app.
func queueEvent(ctx context.Context, c *ent.Client, o *ent.Order, eventType string, biz any) error {
	b, err := json.Marshal(biz)
	if err != nil {
		return err
	}
	_, err = webhook.Fanout(ctx, c, webhook.Event{AppID: o.AppID, Type: eventType, BizData: b})
	return err
}

func stamp(t time.Time) string { return t.UTC().Format(TimeFormat) }

func payStamp(o *ent.Order) string {
	if o.PayTime == nil {
		return ""
	}
	return stamp(*o.PayTime)
}
