// Package combine runs concurrent calls in batches, one batch at a time per
// Combiner: a call that finds nothing running runs at once, alone, in its
// caller's goroutine, exactly as it would without batching; the calls that
// arrive while a batch runs wait for it and then run together as the next
// batch. Only work that would otherwise queue (on a database row lock, on
// SQLite's one writer, on a busy Redis) is gathered, so an idle service
// answers as fast as without it, and a busy one sends one round trip for
// many calls.
package combine

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Options says how a Combiner forms batches.
type Options[C any] struct {
	// Max bounds the calls of one batch.
	Max int
	// Context returns a call's context: a call whose context ends while
	// it waits leaves the queue; a batch's work ends by the earliest
	// deadline of its calls (see BatchContext).
	Context func(C) context.Context
	// Fits reports whether c may join batch (nil: any call fits); a call
	// that does not fit stays queued for a later batch.
	Fits func(batch []C, c C) bool
	// Abandon sets the outcome of a call whose context ended before it was
	// sent (nothing of it was done).
	Abandon func(c C, err error)
}

// Combiner is safe for concurrent use.
type Combiner[C any] struct {
	run func(batch []C) // sets each call's outcome
	o   Options[C]

	mu      sync.Mutex
	queue   []*entry[C]
	running bool
}

type entry[C any] struct {
	c     C
	done  chan struct{} // closed once the call's outcome is set
	taken bool          // in a batch (guarded by the combiner's mu)
}

// New returns a Combiner that runs batches with run, which must set the
// outcome of every call of the batch before it returns.
func New[C any](run func(batch []C), o Options[C]) *Combiner[C] {
	return &Combiner[C]{run: run, o: o}
}

// Do runs c in a batch and returns once its outcome is set. A call whose
// context ends while it waits in the queue leaves it (nothing was sent) and
// Abandon sets its outcome; once in a batch it waits for the batch.
func (cb *Combiner[C]) Do(c C) {
	cb.mu.Lock()
	if !cb.running {
		// Nothing running: c runs at once, alone, in the caller's
		// goroutine; the calls that queue meanwhile are run by a loop
		// started after it (only then is there a goroutine to start).
		cb.running = true
		cb.mu.Unlock()
		cb.run([]C{c})
		cb.mu.Lock()
		if len(cb.queue) > 0 {
			go cb.loop()
		} else {
			cb.running = false
		}
		cb.mu.Unlock()
		return
	}
	e := &entry[C]{c: c, done: make(chan struct{})}
	cb.queue = append(cb.queue, e)
	cb.mu.Unlock()
	ctx := cb.o.Context(c)
	select {
	case <-e.done:
		return
	case <-ctx.Done():
	}
	cb.mu.Lock()
	if !e.taken {
		cb.queue = slices.DeleteFunc(cb.queue, func(q *entry[C]) bool { return q == e })
		cb.mu.Unlock()
		cb.o.Abandon(c, ctx.Err())
		return
	}
	cb.mu.Unlock()
	<-e.done
}

// loop runs batches until the queue is empty.
func (cb *Combiner[C]) loop() {
	for {
		cb.mu.Lock()
		batch := cb.take()
		if len(batch) == 0 {
			cb.running = false
			cb.mu.Unlock()
			return
		}
		cb.mu.Unlock()
		calls := make([]C, len(batch))
		for i, e := range batch {
			calls[i] = e.c
		}
		cb.run(calls)
		for _, e := range batch {
			close(e.done)
		}
	}
}

// take removes the next batch from the queue (mu held): up to Max calls
// that fit, in arrival order.
func (cb *Combiner[C]) take() []*entry[C] {
	var batch []*entry[C]
	var calls []C
	rest := cb.queue[:0]
	for _, e := range cb.queue {
		if err := cb.o.Context(e.c).Err(); err != nil {
			// Its caller gave up before it was sent: it must not shorten
			// the batch's deadline to the past.
			e.taken = true
			cb.o.Abandon(e.c, err)
			close(e.done)
			continue
		}
		if len(batch) == cb.o.Max || (cb.o.Fits != nil && !cb.o.Fits(calls, e.c)) {
			rest = append(rest, e)
			continue
		}
		e.taken = true
		batch = append(batch, e)
		calls = append(calls, e.c)
	}
	clear(cb.queue[len(rest):])
	cb.queue = rest
	return batch
}

// BatchContext is the context of a batch's work: it ends at the earliest
// deadline of the calls, and not when one of them is cancelled (a caller
// that hangs up does not undo the others' work). Values come from the
// first call's context.
func BatchContext[C any](batch []C, ctxOf func(C) context.Context) (context.Context, context.CancelFunc) {
	var earliest time.Time
	for _, c := range batch {
		if d, ok := ctxOf(c).Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	ctx := context.WithoutCancel(ctxOf(batch[0]))
	if earliest.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, earliest)
}

// Queued is the number of calls waiting for a batch.
func (cb *Combiner[C]) Queued() int {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return len(cb.queue)
}
