package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/ent"
	entorder "gatehouse/ent/order"
)

// CheckRefundable reports whether order o may be refunded: only PAID
// orders are. ErrInvalidState otherwise.
func CheckRefundable(o Order) error {
	if o.Status != Paid {
		return fmt.Errorf("%w: order %s is %s, only PAID orders can be refunded", ErrInvalidState, o.OrderNo, o.Status)
	}
	return nil
}

// CompleteRefund records a refund the payment provider has accepted: order
// orderNo moves from PAID to REFUNDED and its order.refunded webhook (with
// reason, the reason sent to the provider) is queued in the same
// transaction. Only the payment flow calls it, after the provider said yes
// (see internal/payment).
//
// Completing a refund twice is harmless: an order already REFUNDED is
// returned as it is, with no second webhook (a repeat after a crash or a
// lost reply finishes what the first call did). Unknown order:
// ErrNotFound; CREATED or CANCELLED: ErrInvalidState.
func (s *Service) CompleteRefund(ctx context.Context, orderNo, reason string) (*ent.Order, error) {
	o, err := s.move(ctx, orderNo, transition{
		from: Paid, to: Refunded, verb: "refunded",
		queue: func(ctx context.Context, c *ent.Client, o *ent.Order, now time.Time) error {
			return queueEvent(ctx, c, o, EventRefunded, RefundedEvent{
				OrderNo: o.OrderNo, Amount: Amount(o.Amount), Status: o.Status, CreateTime: stamp(o.CreateTime), PayTime: payStamp(o),
				RefundTime: stamp(now), Reason: reason,
			})
		},
	})
	if errors.Is(err, ErrInvalidState) {
		cur, gerr := s.client.Order.Query().Where(entorder.OrderNo(orderNo)).Only(ctx)
		if gerr == nil && cur.Status == Refunded {
			return cur, nil
		}
	}
	return o, err
}
