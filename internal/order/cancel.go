package order

import (
	"context"
	"time"

	"gatehouse/ent"
)

// Cancel moves order orderNo from CREATED to CANCELLED and queues its
// order.cancelled webhook in the same transaction. A paid order is not
// cancelled but refunded (see internal/payment).
//
// Unknown order: ErrNotFound. Any status but CREATED, including losing a
// race with a concurrent Pay or Cancel: ErrInvalidState.
func (s *Service) Cancel(ctx context.Context, orderNo string) (*ent.Order, error) {
	return s.move(ctx, orderNo, transition{
		from: Created, to: Cancelled, verb: "cancelled",
		queue: func(ctx context.Context, c *ent.Client, o *ent.Order, now time.Time) error {
			return queueEvent(ctx, c, o, EventCancelled, CancelledEvent{
				OrderNo: o.OrderNo, Amount: Amount(o.Amount), Status: o.Status, CreateTime: stamp(o.CreateTime), CancelTime: stamp(now),
			})
		},
	})
}
