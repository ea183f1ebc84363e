package audit

import (
	"context"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/ent"
	"gatehouse/ent/auditevent"
	"gatehouse/internal/periodic"
	"gatehouse/internal/store"
)

// purgedTotal counts the events the retention job deleted.
var purgedTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "gatehouse_audit_retention_purged_total",
	Help: "Admin audit events deleted by the retention job (older than GATEHOUSE_AUDIT_RETENTION).",
})

func init() { prometheus.MustRegister(purgedTotal) }

// Start runs the retention job until ctx ends: at once, then every
// RetentionEvery, Purge with the cut-off now − Retention. With Retention
// 0 (events are kept forever) it does nothing.
func (s *Service) Start(ctx context.Context) {
	if s.opt.Retention == 0 {
		return
	}
	periodic.Run(ctx, s.opt.RetentionEvery, func(ctx context.Context) {
		n, err := s.Purge(ctx, s.opt.Now().Add(-s.opt.Retention))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("audit: retention job failed; it runs again later", "err", err, "deleted", n)
		case n > 0:
			s.log.Info("audit retention: deleted old audit events", "deleted", n, "retention", s.opt.Retention.String())
		}
	})
}

// Purge deletes every event older than cutoff, in batches of
// RetentionBatch (one short transaction each, so writers never wait long),
// until none is left or ctx ends, and returns how many went. Replicas may
// purge at once: on Postgres a batch is locked SKIP LOCKED, so they take
// disjoint batches; on SQLite there is one writer.
func (s *Service) Purge(ctx context.Context, cutoff time.Time) (int, error) {
	ctx = context.WithValue(ctx, purgeKey{}, true)
	total := 0
	for ctx.Err() == nil {
		n, err := s.purgeBatch(ctx, cutoff)
		total += n
		purgedTotal.Add(float64(n))
		if err != nil {
			return total, fmt.Errorf("audit retention: %w", err)
		}
		if n < s.opt.RetentionBatch {
			return total, nil
		}
	}
	return total, ctx.Err()
}

func (s *Service) purgeBatch(ctx context.Context, cutoff time.Time) (int, error) {
	n := 0
	err := store.WithTx(ctx, s.db.Client, func(tx *ent.Tx) error {
		q := tx.AuditEvent.Query().Where(auditevent.TimeLT(cutoff)).
			Order(auditevent.ByID()).Limit(s.opt.RetentionBatch)
		if s.db.Dialect == dialect.Postgres {
			q.ForUpdate(entsql.WithLockAction(entsql.SkipLocked))
		}
		ids, err := q.IDs(ctx)
		if err != nil || len(ids) == 0 {
			return err
		}
		n, err = tx.AuditEvent.Delete().Where(auditevent.IDIn(ids...)).Exec(ctx)
		return err
	})
	return n, err
}
