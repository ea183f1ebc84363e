package webhook

import (
	"context"

	"gatehouse/internal/combine"
)

// Single publishes (PublishShared) that arrive while another group of
// them is being committed wait for it and then run together: one
// transaction, shared statements and one commit for the group instead of
// one each, the way deductions are batched (internal/inventory). A
// publish that finds nothing running starts at once, alone.
//
// There is one combiner, on Postgres too: while a group is in the
// database the next one gathers, so the commits overlap the gathering
// already. Two combiners per CPU (several groups in the database at once)
// made groups a few times smaller, and on a busy machine each group's
// round trips and commit cost the database and this process about as
// much CPU as its events: 32 concurrent publishers on 2 cores went from
// about 3,900 to 6,200 a second with one (docs/performance-history.md).

// maxPublishGroup bounds the events of one group (one transaction).
const maxPublishGroup = 128

func (s *Service) newPubCombiner() *combine.Combiner[*pubCall] {
	return combine.New(func(batch []*pubCall) {
		ctx, cancel := combine.BatchContext(batch, pubContext)
		defer cancel()
		if len(batch) == 1 {
			ctx = batch[0].ctx // alone: exactly as without grouping
		}
		s.runPublishGroup(ctx, batch)
	}, combine.Options[*pubCall]{
		Max:     maxPublishGroup,
		Context: pubContext,
		Abandon: func(c *pubCall, err error) { c.err = publishFailure(c.ctx, err) },
	})
}

func pubContext(c *pubCall) context.Context { return c.ctx }
