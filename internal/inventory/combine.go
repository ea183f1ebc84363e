package inventory

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Deductions that arrive while another one is being committed wait for it
// and then run together: one transaction and one commit for the whole
// batch instead of one each. A deduction that finds nothing running starts
// at once, alone, exactly as it would without batching; only the ones that
// would otherwise queue on the database (on a hot SKU's row lock, or on
// SQLite's one writer) are gathered. See docs/inventory.md, "Batches".

// maxBatch bounds the deductions of one batch (one transaction).
const maxBatch = 64

// call is one deduction waiting for, or taking part in, a batch.
type call struct {
	ctx    context.Context // the deduction's work context
	appKey string
	in     DeductInput

	done  chan struct{} // closed when res, rec and err are set
	taken bool          // in a batch (guarded by the combiner's mu)

	res Result
	rec *record // the biz_no's record, when it had one
	err error
}

// combiner runs the calls given to it in batches, one batch at a time: the
// calls that queue while a batch runs form the next one.
type combiner struct {
	run func(batch []*call) // sets each call's outcome

	mu      sync.Mutex
	queue   []*call
	running bool
}

// do runs c in a batch and returns when its outcome is set. A call whose
// context ends while it waits in the queue leaves it (nothing was sent)
// with the context's error; once in a batch it waits for the batch, which
// ends by the earliest deadline of its calls.
func (cb *combiner) do(c *call) {
	cb.mu.Lock()
	if !cb.running {
		// Nothing running: c runs at once, alone, in the caller's
		// goroutine; the calls that queue meanwhile are run by a loop
		// started after it (only then is there a goroutine to start).
		cb.running = true
		c.taken = true
		cb.mu.Unlock()
		cb.run([]*call{c})
		cb.mu.Lock()
		if len(cb.queue) > 0 {
			go cb.loop()
		} else {
			cb.running = false
		}
		cb.mu.Unlock()
		return
	}
	c.done = make(chan struct{})
	cb.queue = append(cb.queue, c)
	cb.mu.Unlock()
	select {
	case <-c.done:
		return
	case <-c.ctx.Done():
	}
	cb.mu.Lock()
	if !c.taken {
		cb.queue = slices.DeleteFunc(cb.queue, func(q *call) bool { return q == c })
		cb.mu.Unlock()
		c.err = unavailable(c.ctx.Err())
		return
	}
	cb.mu.Unlock()
	<-c.done
}

// loop runs batches until the queue is empty.
func (cb *combiner) loop() {
	for {
		cb.mu.Lock()
		batch := cb.take()
		if len(batch) == 0 {
			cb.running = false
			cb.mu.Unlock()
			return
		}
		cb.mu.Unlock()
		cb.run(batch)
		for _, c := range batch {
			close(c.done)
		}
	}
}

// take removes the next batch from the queue (mu held): up to maxBatch
// calls in arrival order, each biz_no at most once (a later call with a
// biz_no already in the batch stays queued and runs as its repeat).
func (cb *combiner) take() []*call {
	var batch []*call
	seen := make(map[string]bool)
	rest := cb.queue[:0]
	for _, c := range cb.queue {
		if err := c.ctx.Err(); err != nil {
			// Its caller gave up before it was sent: it must not shorten
			// the batch's deadline to the past.
			c.taken, c.err = true, unavailable(err)
			close(c.done)
			continue
		}
		if len(batch) == maxBatch || seen[c.in.BizNo] {
			rest = append(rest, c)
			continue
		}
		seen[c.in.BizNo] = true
		c.taken = true
		batch = append(batch, c)
	}
	clear(cb.queue[len(rest):])
	cb.queue = rest
	return batch
}

// batchContext is the context of a batch's database work: it ends at the
// earliest deadline of the calls, and not when one of them is cancelled
// (a caller that hangs up does not undo the others' deductions).
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var earliest time.Time
	for _, c := range batch {
		if d, ok := c.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	ctx := context.WithoutCancel(batch[0].ctx)
	if earliest.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, earliest)
}
