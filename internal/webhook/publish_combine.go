package webhook

import (
	"context"
	"runtime"
	"sync/atomic"

	"entgo.io/ent/dialect"

	"gatehouse/internal/combine"
)

// Single publishes (PublishShared) that arrive while another group of
// them is being committed wait for it and then run together: one
// transaction, shared statements and one commit for the group instead of
// one each, the way deductions are batched (internal/inventory). A
// publish that finds nothing running starts at once, alone.

// maxPublishGroup bounds the events of one group (one transaction).
const maxPublishGroup = 128

// pubCombiners are the combiners of single publishes: on Postgres two per
// CPU, taken in turn, so that a few groups are in the database at once
// (each waits on its commit) and the next ones gather meanwhile; SQLite
// has one writer, so one.
type pubCombiners struct {
	all  []*combine.Combiner[*pubCall]
	next atomic.Uint32
}

func (s *Service) newPubCombiners() *pubCombiners {
	n := 1
	if s.db.Dialect == dialect.Postgres {
		n = 2 * runtime.GOMAXPROCS(0)
	}
	p := &pubCombiners{all: make([]*combine.Combiner[*pubCall], n)}
	for i := range p.all {
		p.all[i] = combine.New(func(batch []*pubCall) {
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
	return p
}

func pubContext(c *pubCall) context.Context { return c.ctx }

// pubCombinerFor returns the combiner the next single publish joins.
func (s *Service) pubCombinerFor() *combine.Combiner[*pubCall] {
	p := s.pub
	return p.all[int(p.next.Add(1))%len(p.all)]
}
