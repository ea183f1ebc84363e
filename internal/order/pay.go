package order

import (
	"context"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/errs"
)

// ErrInvalidState: the order's status does not allow the operation (for
// example paying an order that is not CREATED).
var ErrInvalidState = errs.New(errs.InvalidState, "order status does not allow this")

// Pay moves order orderNo from CREATED to PAID with the pay time set, and
// queues its order.paid webhook in the same transaction.
//
// Unknown order: ErrNotFound. Any status but CREATED, including losing a
// race with a concurrent Pay: ErrInvalidState.
func (s *Service) Pay(ctx context.Context, orderNo string) (*ent.Order, error) {
	return s.move(ctx, orderNo, transition{
		from: Created, to: Paid, verb: "paid",
		set: func(u *ent.OrderUpdate, now time.Time) { u.SetPayTime(now) },
		queue: func(ctx context.Context, c *ent.Client, o *ent.Order, _ time.Time) error {
			return queueEvent(ctx, c, o, EventPaid, PaidEvent{
				OrderNo: o.OrderNo, Amount: Amount(o.Amount), Status: o.Status, CreateTime: stamp(o.CreateTime), PayTime: payStamp(o),
			})
		},
	})
}
