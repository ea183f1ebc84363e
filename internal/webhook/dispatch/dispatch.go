package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/webhook/dispatch/adapter"
)

// Delivery statuses.
const (
	StatusPending   = webhookdelivery.StatusPENDING
	StatusRetrying  = webhookdelivery.StatusRETRYING
	StatusSuccess   = webhookdelivery.StatusSUCCESS
	StatusFailed    = webhookdelivery.StatusFAILED
	StatusCancelled = webhookdelivery.StatusCANCELLED
)

// claimErrorBackoff is how long the loop waits after the database failed.
const claimErrorBackoff = time.Second

// dispatcher runs the claim loop and the worker pool of a Dispatcher.
//
// The loop claims due deliveries (see claim: at most PerApp in flight per
// app, fair across apps, held apps skipped) by setting lease_until, up to
// twice as many as there are workers: while Workers attempts run, the next
// ones are claimed already, so a claim's round trips overlap attempts. A
// worker makes one attempt and stores its outcome only while it still
// holds that lease: lease_until is the fencing token.
// The loop sleeps until the next due time, a wake-up (new work in this or,
// on Postgres, another replica; a finished worker), or the poll interval.
type dispatcher struct {
	s *Dispatcher

	stop    chan struct{} // closed by shutdown: claim nothing more
	done    chan struct{} // closed when the loop has returned
	slots   chan struct{} // one token per claimed delivery not finished (2 × Workers)
	running chan struct{} // one token per HTTP exchange under way (Workers)
	workers sync.WaitGroup

	// abort cancels in-flight attempts when draining takes too long.
	abortCtx context.Context
	abort    context.CancelFunc

	// Claim batching (loop goroutine only): backlog is set when the last
	// claim filled every idle worker; then the loop claims once batch
	// workers are idle, or batchWait after one was.
	backlog bool
	batch   int
	short   time.Time

	// handoff: workers take hand-offs (SQLite; see work).
	handoff bool
}

func newDispatcher(s *Dispatcher) *dispatcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &dispatcher{
		s:        s,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		slots:    make(chan struct{}, 2*s.opt.Workers),
		running:  make(chan struct{}, s.opt.Workers),
		abortCtx: ctx,
		abort:    cancel,
		batch:    max(1, s.opt.Workers),
		handoff:  s.db.Dialect != dialect.Postgres,
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

// dispatchDue hands due deliveries to idle workers and returns how long
// the loop may sleep.
func (d *dispatcher) dispatchDue() time.Duration {
	var claimedAt time.Time // the clock of the last claim
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
		if d.backlog && free < d.batch {
			// Draining a backlog: let more workers finish so that one
			// claim serves several, but never wait longer than batchWait.
			if d.short.IsZero() {
				d.short = time.Now()
			}
			if left := batchWait - time.Since(d.short); left > 0 {
				return left
			}
		}
		d.short = time.Time{}
		ctx, cancel := context.WithTimeout(d.abortCtx, 10*time.Second)
		claimedAt = d.s.now()
		jobs, err := d.claim(ctx, claimedAt, free)
		cancel()
		if err != nil {
			if d.abortCtx.Err() == nil {
				d.s.log.Error("webhook: claiming deliveries failed", "err", err)
			}
			return claimErrorBackoff
		}
		for _, j := range jobs {
			d.slots <- struct{}{}
			d.workers.Add(1)
			go d.work(j)
		}
		d.backlog = len(jobs) == free
		if len(jobs) < free {
			break
		}
	}
	// The floor keeps the loop from spinning on rows that look due but
	// another replica is claiming at this very moment.
	return max(d.untilNextDue(claimedAt), minWait)
}

// minWait is the shortest sleep of the loop between two claims.
const minWait = 2 * time.Millisecond

// batchWait bounds how long a claim waits for more idle workers while a
// backlog drains (see dispatchDue).
const batchWait = 5 * time.Millisecond

// untilNextDue returns the time until the next delivery becomes due (see
// adapter.NextDueSQL), at most the poll interval: the earliest due time after
// claimedAt, the clock of the claim just made. A delivery that became due
// between that claim and now was not seen by the claim; counting from
// the claim's clock (not from now) finds it, and the loop claims it at
// once rather than after the poll interval.
func (d *dispatcher) untilNextDue(claimedAt time.Time) time.Duration {
	ctx, cancel := context.WithTimeout(d.abortCtx, 5*time.Second)
	defer cancel()
	now := d.s.now()
	var raw any
	err := d.s.db.SQL.QueryRowContext(ctx, adapter.NextDueSQL, adapter.NextDueParams{ClaimedAt: claimedAt, DayAgo: claimedAt.Add(-24 * time.Hour)}.Args()...).Scan(&raw)
	var next time.Time
	if err == nil && raw != nil {
		next, err = dbTimeValue(raw)
	}
	switch {
	case err == nil && raw == nil:
		return d.s.opt.PollInterval
	case err != nil:
		if d.abortCtx.Err() == nil {
			d.s.log.Error("webhook: reading the next due time failed", "err", err)
		}
		return claimErrorBackoff
	}
	return min(max(next.Sub(now), 0), d.s.opt.PollInterval)
}

// dbTimeValue reads a time computed by SQL (min over a subquery): Postgres
// returns a time.Time, SQLite the stored text, written as the driver
// writes times (_time_format=sqlite).
func dbTimeValue(v any) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case string:
		return time.Parse("2006-01-02 15:04:05.999999999-07:00", x)
	case []byte:
		return time.Parse("2006-01-02 15:04:05.999999999-07:00", string(x))
	}
	return time.Time{}, fmt.Errorf("webhook: unexpected time value %T", v)
}

// work runs the attempt of j once a worker is free. A delivery still
// waiting when shutdown begins is given back unattempted.
//
// On SQLite a worker whose attempt was delivered keeps its slot for the
// next due delivery of the same endpoint, leased in the transaction that
// stores the outcome (a hand-off: see adapter.HandoffSQLite), up to maxHandoffs
// in a row; then, or when nothing is handed off, the slot goes back to
// the claim loop, whose claims keep the apps fair. A failed attempt never
// hands off: an endpoint that fails or hangs gets the claim loop's share
// as before. SQLite has one writer, and a claim there is a dozen
// adapter.Statements under its lock (one per endpoint of each app served), while
// a hand-off is one more statement in a transaction that runs anyway:
// for an app of 5 endpoints, whose share per endpoint is one slot, the
// serial claim loop was the bound. On Postgres a claim is one round trip
// beside the workers, and hand-offs competed with it for the same rows:
// the drain of one endpoint per app was a third slower with them, the
// fan-out no faster (see docs/performance.md), so there is none.
func (d *dispatcher) work(j job) {
	defer func() {
		<-d.slots
		d.workers.Done()
		d.s.Notify()
	}()
	for n := 0; ; n++ {
		if n > 0 && d.stopping() {
			d.s.release(j)
			return
		}
		select {
		case d.running <- struct{}{}:
		case <-d.stop:
			d.s.release(j)
			return
		}
		// The running token covers the HTTP exchange only: it goes back
		// once the reply is in (sent), while the outcome is stored, so
		// that Workers requests can be on the wire while the outcomes of
		// others are written (the slot, and the lease, stay until then).
		held := true
		sent := func() {
			if held {
				held = false
				<-d.running
			}
		}
		next := d.s.attempt(d.abortCtx, j, d.handoff && n < maxHandoffs && !d.stopping(), sent)
		sent()
		if next == nil {
			return
		}
		d.s.handoffs.Add(1)
		j = *next
	}
}

// maxHandoffs bounds the deliveries a worker takes in a row by hand-off
// (see work) before its slot goes back to the claim loop.
const maxHandoffs = 8

// stopping reports whether shutdown has begun.
func (d *dispatcher) stopping() bool {
	select {
	case <-d.stop:
		return true
	default:
		return false
	}
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
