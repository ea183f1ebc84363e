package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/internal/periodic"
	"gatehouse/internal/webhook/dispatch/adapter"
)

// purgedTotal counts the rows the retention job deleted, per table.
var purgedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gatehouse_webhook_retention_purged_total",
	Help: "Rows deleted by the webhook retention job: final deliveries older than GATEHOUSE_WEBHOOK_RETENTION and their attempts.",
}, []string{"table"})

func init() { prometheus.MustRegister(purgedTotal) }

// Purged is what one run of the retention job deleted.
type Purged struct {
	Deliveries, Attempts int
}

// retain runs the retention job until ctx ends: at start and then every
// RetentionEvery, Purge with the cut-off now − Retention (unless deliveries
// are kept forever), the idempotency keys of Publish past their window,
// and AutoDisable.
func (s *Dispatcher) retain(ctx context.Context) {
	periodic.Run(ctx, s.opt.RetentionEvery, func(ctx context.Context) {
		if purge := s.opt.PurgePublications; purge != nil {
			if _, err := purge(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("webhook: purging old idempotency keys failed; it runs again later", "err", err)
			}
		}
		if _, err := s.AutoDisable(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("webhook: the auto-disable check failed; it runs again later", "err", err)
		}
		if s.opt.Retention == 0 { // kept forever
			return
		}
		p, err := s.Purge(ctx, s.opt.Now().Add(-s.opt.Retention))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("webhook: retention job failed; it runs again later", "err", err, "deleted_deliveries", p.Deliveries)
		case p.Deliveries > 0:
			s.log.Info("webhook retention: deleted old final deliveries and their attempts",
				"deliveries", p.Deliveries, "attempts", p.Attempts, "retention", s.opt.Retention.String())
		}
	})
}

// Purge deletes every delivery in a final state last changed before
// cutoff, with its attempts, in batches of RetentionBatch deliveries (one
// short transaction each, so other writers never wait long), until none
// is left or ctx ends.
func (s *Dispatcher) Purge(ctx context.Context, cutoff time.Time) (Purged, error) {
	var total Purged
	cutoff = adapter.DBTime(cutoff)
	for ctx.Err() == nil {
		p, err := s.purgeBatch(ctx, cutoff)
		total.Deliveries += p.Deliveries
		total.Attempts += p.Attempts
		purgedTotal.WithLabelValues("webhook_deliveries").Add(float64(p.Deliveries))
		purgedTotal.WithLabelValues("delivery_attempts").Add(float64(p.Attempts))
		if err != nil {
			return total, fmt.Errorf("webhook retention: %w", err)
		}
		if p.Deliveries < s.opt.RetentionBatch {
			break
		}
	}
	return total, ctx.Err()
}

func (s *Dispatcher) purgeBatch(ctx context.Context, cutoff time.Time) (Purged, error) {
	var p Purged
	if s.db.Dialect == dialect.Postgres {
		err := s.db.SQL.QueryRowContext(ctx, adapter.PurgePostgres, adapter.RetentionParams{Cutoff: cutoff, Batch: s.opt.RetentionBatch}.Args()...).Scan(&p.Deliveries, &p.Attempts)
		return p, err
	}
	err := s.sql.InTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, adapter.DoomedSQLite, adapter.RetentionParams{Cutoff: cutoff, Batch: s.opt.RetentionBatch}.Args()...)
		if err != nil {
			return err
		}
		var doomed adapter.PurgeParams
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			doomed.DeliveryIDs = append(doomed.DeliveryIDs, id)
		}
		if err := rows.Err(); err != nil || len(doomed.DeliveryIDs) == 0 {
			return err
		}
		k := len(doomed.DeliveryIDs)
		res, err := tx.ExecContext(ctx, adapter.PurgeAttemptsSQLite(k), doomed.Args()...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		p.Attempts = int(n)
		if res, err = tx.ExecContext(ctx, adapter.PurgeDeliveriesSQLite(k), doomed.Args()...); err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		p.Deliveries = int(n)
		return nil
	})
	if err != nil {
		return Purged{}, err
	}
	return p, nil
}
