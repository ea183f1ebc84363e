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

// ErrInvalidState: the order's status does not allow the operation (for
// example paying an order that is not CREATED).
var ErrInvalidState = errors.New("order status does not allow this")

// PaidEvent is the bizData of an order.paid webhook.
type PaidEvent struct {
	OrderNo    string `json:"order_no"`
	Amount     Amount `json:"amount"`
	Status     Status `json:"status"`
	CreateTime string `json:"create_time"`
	PayTime    string `json:"pay_time"`
}

// Pay moves order orderNo from CREATED to PAID with the pay time set, and
// queues its order.paid webhook in the same transaction: both happen or
// neither does, and the caller never waits for the delivery. An app
// without a callback URL gets no webhook (there is nowhere to send it).
//
// Unknown order: ErrNotFound. Any status but CREATED, including losing a
// race with a concurrent Pay: ErrInvalidState.
func (s *Service) Pay(ctx context.Context, orderNo string) (*ent.Order, error) {
	var paid *ent.Order
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		o, err := tx.Order.Query().Where(entorder.OrderNo(orderNo)).Only(ctx)
		if ent.IsNotFound(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if o.Status != Created {
			return fmt.Errorf("%w: order %s is %s, only CREATED orders can be paid", ErrInvalidState, orderNo, o.Status)
		}
		now := s.now().UTC().Truncate(time.Millisecond)
		// The status condition makes a concurrent Pay that read CREATED
		// too update nothing (Postgres re-checks it after the first commit).
		n, err := tx.Order.Update().
			Where(entorder.ID(o.ID), entorder.StatusEQ(Created)).
			SetStatus(Paid).
			SetPayTime(now).
			Save(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: order %s was paid concurrently", ErrInvalidState, orderNo)
		}
		if paid, err = tx.Order.Get(ctx, o.ID); err != nil {
			return err
		}
		v := fromEnt(paid)
		biz, err := json.Marshal(PaidEvent{
			OrderNo:    v.OrderNo,
			Amount:     Amount(v.Amount),
			Status:     v.Status,
			CreateTime: v.CreateTime.Format(TimeFormat),
			PayTime:    v.PayTime.Format(TimeFormat),
		})
		if err != nil {
			return err
		}
		_, err = webhook.Enqueue(ctx, tx.Client(), o.AppID, webhook.EventOrderPaid, biz)
		return err
	})
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidState) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("pay order %s: %w", orderNo, err)
	}
	return paid.Unwrap(), nil
}
