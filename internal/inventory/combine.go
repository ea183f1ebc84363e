package inventory

import (
	"context"
	"slices"

	"gatehouse/internal/combine"
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

	res Result
	rec *record // the biz_no's record, when it had one
	err error
}

// newCombiner returns a combiner of deductions: batches of up to maxBatch
// calls in arrival order, each biz_no at most once (a later call with a
// biz_no already in the batch stays queued and runs as its repeat). A call
// whose context ends while it waits leaves the queue with the context's
// error (nothing was sent); once in a batch it waits for the batch, which
// ends by the earliest deadline of its calls (batchContext).
func (s *Service) newCombiner() *combine.Combiner[*call] {
	return combine.New(s.runBatch, combine.Options[*call]{
		Max:     maxBatch,
		Context: callContext,
		Fits: func(batch []*call, c *call) bool {
			return !slices.ContainsFunc(batch, func(b *call) bool { return b.in.BizNo == c.in.BizNo })
		},
		Abandon: func(c *call, err error) { c.err = unavailable(err) },
	})
}

func callContext(c *call) context.Context { return c.ctx }

// batchContext is the context of a batch's database work: it ends at the
// earliest deadline of the calls, and not when one of them is cancelled
// (a caller that hangs up does not undo the others' deductions).
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	return combine.BatchContext(batch, callContext)
}
