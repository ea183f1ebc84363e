package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"gatehouse/ent"
	"gatehouse/ent/predicate"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/store"
)

// Delivery statuses.
const (
	StatusPending  = webhookdelivery.StatusPENDING
	StatusRetrying = webhookdelivery.StatusRETRYING
	StatusSuccess  = webhookdelivery.StatusSUCCESS
	StatusFailed   = webhookdelivery.StatusFAILED
)

// claimErrorBackoff is how long the loop waits after the database failed.
const claimErrorBackoff = time.Second

// dispatcher runs the claim loop and the worker pool of a Service.
//
// The loop claims due deliveries (status PENDING or RETRYING, next attempt
// in the past, no live lease), as many as there are idle workers, by
// setting lease_until. A worker makes one attempt and stores its outcome
// only while it still holds that lease: lease_until is the fencing token.
// The loop sleeps until the next due time, a wake-up (new work in this
// process, a finished worker), or the poll interval.
type dispatcher struct {
	s *Service

	stop    chan struct{} // closed by shutdown: claim nothing more
	done    chan struct{} // closed when the loop has returned
	slots   chan struct{} // one token per busy worker
	workers sync.WaitGroup

	// abort cancels in-flight attempts when draining takes too long.
	abortCtx context.Context
	abort    context.CancelFunc
}

func newDispatcher(s *Service) *dispatcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &dispatcher{
		s:        s,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		slots:    make(chan struct{}, s.opt.Workers),
		abortCtx: ctx,
		abort:    cancel,
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-d.s.wake:
		case <-timer.C:
		}
		wait := d.dispatchDue()
		timer.Reset(wait)
	}
}

// dispatchDue hands every due delivery to an idle worker and returns how
// long the loop may sleep.
func (d *dispatcher) dispatchDue() time.Duration {
	for {
		select {
		case <-d.stop:
			return d.s.opt.PollInterval
		default:
		}
		free := cap(d.slots) - len(d.slots)
		if free == 0 {
			// A finishing worker wakes the loop.
			return d.s.opt.PollInterval
		}
		ctx, cancel := context.WithTimeout(d.abortCtx, 10*time.Second)
		rows, err := d.claim(ctx, free)
		cancel()
		if err != nil {
			if d.abortCtx.Err() == nil {
				d.s.log.Error("webhook: claiming deliveries failed", "err", err)
			}
			return claimErrorBackoff
		}
		for _, r := range rows {
			d.slots <- struct{}{}
			d.workers.Add(1)
			go d.work(r)
		}
		if len(rows) < free {
			break
		}
	}
	// The floor keeps the loop from spinning on rows that look due but
	// another replica is claiming at this very moment.
	return max(d.untilNextDue(), minWait)
}

// minWait is the shortest sleep of the loop between two claims.
const minWait = 2 * time.Millisecond

// untilNextDue returns the time until the earliest unleased delivery is
// due, at most the poll interval.
func (d *dispatcher) untilNextDue() time.Duration {
	ctx, cancel := context.WithTimeout(d.abortCtx, 5*time.Second)
	defer cancel()
	now := dbTime(time.Now())
	next, err := d.s.client.WebhookDelivery.Query().
		Where(
			webhookdelivery.StatusIn(StatusPending, StatusRetrying),
			webhookdelivery.Or(webhookdelivery.LeaseUntilIsNil(), webhookdelivery.LeaseUntilLT(now)),
		).
		Order(webhookdelivery.ByNextAttemptAt()).
		First(ctx)
	switch {
	case ent.IsNotFound(err):
		return d.s.opt.PollInterval
	case err != nil:
		if d.abortCtx.Err() == nil {
			d.s.log.Error("webhook: reading the next due time failed", "err", err)
		}
		return claimErrorBackoff
	}
	return min(max(time.Until(next.NextAttemptAt), 0), d.s.opt.PollInterval)
}

// claim leases up to n due deliveries to this process. On Postgres the
// candidate rows are locked with FOR UPDATE SKIP LOCKED, so replicas
// claiming at once take different rows without waiting for each other; on
// SQLite the transaction holds the write lock from its start (the store
// opens it IMMEDIATE). On both, the UPDATE repeats the lease condition and
// only rows carrying this claim's lease value are returned.
func (d *dispatcher) claim(ctx context.Context, n int) ([]*ent.WebhookDelivery, error) {
	var rows []*ent.WebhookDelivery
	err := store.WithTx(ctx, d.s.client, func(tx *ent.Tx) error {
		now := dbTime(time.Now())
		due := []predicate.WebhookDelivery{
			webhookdelivery.StatusIn(StatusPending, StatusRetrying),
			webhookdelivery.NextAttemptAtLTE(now),
			webhookdelivery.Or(webhookdelivery.LeaseUntilIsNil(), webhookdelivery.LeaseUntilLT(now)),
		}
		q := tx.WebhookDelivery.Query().
			Where(due...).
			Order(webhookdelivery.ByNextAttemptAt(), webhookdelivery.ByID()).
			Limit(n)
		if d.s.dialect == dialect.Postgres {
			q = q.ForUpdate(sql.WithLockAction(sql.SkipLocked))
		}
		ids, err := q.IDs(ctx)
		if err != nil || len(ids) == 0 {
			return err
		}
		lease := dbTime(now.Add(d.s.opt.Lease))
		if _, err := tx.WebhookDelivery.Update().
			Where(append(due, webhookdelivery.IDIn(ids...))...).
			SetLeaseUntil(lease).
			Save(ctx); err != nil {
			return err
		}
		rows, err = tx.WebhookDelivery.Query().
			Where(webhookdelivery.IDIn(ids...), webhookdelivery.LeaseUntilEQ(lease)).
			Order(webhookdelivery.ByNextAttemptAt(), webhookdelivery.ByID()).
			All(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return rows, nil
}

func (d *dispatcher) work(r *ent.WebhookDelivery) {
	defer func() {
		<-d.slots
		d.workers.Done()
		d.s.Notify()
	}()
	d.s.attempt(d.abortCtx, r)
}

// shutdown stops claiming, waits for in-flight attempts within the drain
// bound, then aborts the rest (their leases are released by the workers).
func (d *dispatcher) shutdown(ctx context.Context) error {
	close(d.stop)
	<-d.done
	idle := make(chan struct{})
	go func() {
		d.workers.Wait()
		close(idle)
	}()
	bound := d.s.opt.DrainTimeout
	if dl, ok := ctx.Deadline(); ok {
		// Keep time for releasing leases before the caller's deadline.
		bound = min(bound, time.Until(dl)-2*time.Second)
	}
	timer := time.NewTimer(max(bound, 0))
	defer timer.Stop()
	select {
	case <-idle:
		d.abort()
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	d.abort()
	select {
	case <-idle:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("webhook: in-flight attempts did not stop")
	}
}
