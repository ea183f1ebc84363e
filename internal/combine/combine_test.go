package combine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

type testCall struct {
	ctx context.Context
	key string
	ran bool
	err error
}

// recorder runs batches, remembering their keys; the first batch waits
// for release.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	release chan struct{}
	started chan struct{}
}

func newRecorder() *recorder {
	return &recorder{release: make(chan struct{}), started: make(chan struct{})}
}

func (r *recorder) run(batch []*testCall) {
	r.mu.Lock()
	var keys []string
	for _, c := range batch {
		keys = append(keys, c.key)
		c.ran = true
	}
	r.batches = append(r.batches, keys)
	first := len(r.batches) == 1
	r.mu.Unlock()
	if first {
		close(r.started)
		<-r.release
	}
}

func (r *recorder) got() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func newTestCombiner(r *recorder, max int) *Combiner[*testCall] {
	return New(r.run, Options[*testCall]{
		Max:     max,
		Context: func(c *testCall) context.Context { return c.ctx },
		Fits: func(batch []*testCall, c *testCall) bool {
			return !slices.ContainsFunc(batch, func(b *testCall) bool { return b.key == c.key })
		},
		Abandon: func(c *testCall, err error) { c.err = err },
	})
}

// waitQueued waits until n calls wait for a batch.
func waitQueued(t *testing.T, cb *Combiner[*testCall], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for cb.Queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", cb.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A call that finds nothing running runs at once, alone, in its caller's
// goroutine.
func TestLoneCallRunsAtOnce(t *testing.T) {
	r := newRecorder()
	close(r.release)
	cb := newTestCombiner(r, 8)
	c := &testCall{ctx: context.Background(), key: "a"}
	cb.Do(c)
	if !c.ran || !slices.EqualFunc(r.got(), [][]string{{"a"}}, slices.Equal) {
		t.Fatalf("ran %v, batches %v; want one batch [a]", c.ran, r.got())
	}
}

// holdFirst starts a call with key "first" whose batch runs until
// r.release is closed, and returns once it runs; wg waits for it too.
func holdFirst(max int, wg *sync.WaitGroup) (*recorder, *Combiner[*testCall]) {
	r := newRecorder()
	cb := newTestCombiner(r, max)
	wg.Go(func() { cb.Do(&testCall{ctx: context.Background(), key: "first"}) })
	<-r.started
	return r, cb
}

// Calls that arrive while a batch runs form the next batches: in arrival
// order, at most Max each, a call that does not fit (same key) left for a
// later one.
func TestQueuedCallsFormTheNextBatches(t *testing.T) {
	var wg sync.WaitGroup
	r, cb := holdFirst(3, &wg)
	for i, k := range []string{"x", "x", "y", "z", "w"} {
		wg.Go(func() { cb.Do(&testCall{ctx: context.Background(), key: k}) })
		waitQueued(t, cb, i+1)
	}
	close(r.release)
	wg.Wait()
	want := [][]string{{"first"}, {"x", "y", "z"}, {"x", "w"}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
}

// A queued call whose context ends leaves the queue unsent: Abandon gives
// it the context's error and no batch contains it.
func TestAbandonedCallIsNotSent(t *testing.T) {
	var wg sync.WaitGroup
	r, cb := holdFirst(8, &wg)
	ctx, cancel := context.WithCancel(context.Background())
	gone := &testCall{ctx: ctx, key: "gone"}
	stays := &testCall{ctx: context.Background(), key: "stays"}
	wg.Go(func() { cb.Do(gone) })
	waitQueued(t, cb, 1)
	wg.Go(func() { cb.Do(stays) })
	waitQueued(t, cb, 2)
	cancel()
	waitQueued(t, cb, 1)
	close(r.release)
	wg.Wait()
	if gone.ran || !errors.Is(gone.err, context.Canceled) {
		t.Fatalf("abandoned call: ran %v, err %v", gone.ran, gone.err)
	}
	want := [][]string{{"first"}, {"stays"}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
}

// A batch's context ends at the earliest deadline of its calls, and not
// when one of them is cancelled.
func TestBatchContext(t *testing.T) {
	soon := time.Now().Add(time.Minute)
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithDeadline(context.Background(), soon.Add(time.Hour))
	defer cancelB()
	ctxC, cancelC := context.WithDeadline(context.Background(), soon)
	defer cancelC()
	batch := []*testCall{{ctx: ctxA}, {ctx: ctxB}, {ctx: ctxC}}
	ctx, cancel := BatchContext(batch, func(c *testCall) context.Context { return c.ctx })
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(soon) {
		t.Fatalf("deadline %v %v, want %v", d, ok, soon)
	}
	cancelA()
	if ctx.Err() != nil {
		t.Fatalf("a caller hung up and the batch ended: %v", ctx.Err())
	}
}
