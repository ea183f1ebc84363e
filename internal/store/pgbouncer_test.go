package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"gatehouse/ent"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
)

// workload runs what gatehouse sends Postgres, from many connections at
// once: transactions, single writes (autocommit, with and without a
// deadline), Ent reads and the hot prepared reads (Stmt). It returns the
// first error.
func workload(ctx context.Context, db *store.DB) error {
	read := store.NewStmt(db, "SELECT count(*) FROM tickets WHERE title = ?")
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for g := range 12 {
		wg.Go(func() {
			for i := range 15 {
				var err error
				switch (g + i) % 4 {
				case 0:
					err = store.WithTx(ctx, db.Client, func(tx *ent.Tx) error {
						t, err := tx.Ticket.Create().SetTitle("tx").Save(ctx)
						if err != nil {
							return err
						}
						return tx.Ticket.UpdateOneID(t.ID).SetTitle("tx2").Exec(ctx)
					})
				case 1:
					dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					_, err = db.Ticket.Create().SetTitle("single").Save(dctx)
					cancel()
				case 2:
					_, err = db.Ticket.Query().Limit(5).All(ctx)
				case 3:
					var n int
					err = read.QueryRow(ctx, []any{"single"}, &n)
				}
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// TestThroughPgBouncerTransactionMode: gatehouse opens, migrates and runs
// every kind of statement through PgBouncer in transaction mode (two
// server connections shared by many client connections, so that a
// statement prepared by name on one client connection meets another's),
// with no setting: the pooler is detected, nothing is prepared by name,
// and there is no session to LISTEN on. Replicas migrating at once take
// turns. The same workload with pgx's default statement cache forced in
// the URL fails (42P05 or 26000), so the setup does reproduce the problem.
func TestThroughPgBouncerTransactionMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := testenv.PostgresURL(t)
	bouncer := fleet.StartPgBouncer(t, "transaction", "default_pool_size = 2")
	pooled := bouncer.URL(t, direct)

	// Three replicas start at once: each migrates under the lock.
	dbs := make([]*store.DB, 3)
	reps := make([]store.Report, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range dbs {
		wg.Go(func() {
			db, err := store.Open(ctx, pooled)
			if err != nil {
				errs[i] = err
				return
			}
			dbs[i] = db
			reps[i], errs[i] = db.MigrateReport(ctx)
		})
	}
	wg.Wait()
	for _, db := range dbs {
		if db != nil {
			defer db.Close()
		}
	}
	applied := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v\npgbouncer: %s", i, err, bouncer.Log())
		}
		if len(reps[i].Applied) > 0 {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("%d replicas applied migrations, want exactly 1: %+v", applied, reps)
	}
	db := dbs[0]
	if !db.ThroughPooler() || db.CanListen() {
		t.Fatalf("through PgBouncer: ThroughPooler %v, CanListen %v; want true, false", db.ThroughPooler(), db.CanListen())
	}
	if err := workload(ctx, db); err != nil {
		t.Fatalf("workload through PgBouncer: %v\npgbouncer: %s", err, bouncer.Log())
	}
	// The lock was given back: a later start migrates (nothing) at once.
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if rep, err := dbs[1].MigrateReport(mctx); err != nil || rep.Changed() {
		t.Fatalf("migrating again: %v, %+v", err, rep)
	}

	t.Run("named statements fail", func(t *testing.T) {
		forced, err := store.Open(ctx, pooled+"&default_query_exec_mode=cache_statement")
		if err != nil {
			t.Fatal(err)
		}
		defer forced.Close()
		err = workload(ctx, forced)
		var pge *pgconn.PgError
		if err == nil || !errors.As(err, &pge) || (pge.Code != "42P05" && pge.Code != "26000") {
			t.Fatalf("named prepared statements through PgBouncer in transaction mode: %v, want SQLSTATE 42P05 or 26000", err)
		}
	})

	t.Run("direct", func(t *testing.T) {
		d, err := store.Open(ctx, direct)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if d.ThroughPooler() || !d.CanListen() {
			t.Fatalf("direct: ThroughPooler %v, CanListen %v; want false, true", d.ThroughPooler(), d.CanListen())
		}
	})

	t.Run("direct URL", func(t *testing.T) {
		d, err := store.Open(ctx, pooled, store.WithDirectURL(direct))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if !d.ThroughPooler() || !d.CanListen() {
			t.Fatalf("with a direct URL: ThroughPooler %v, CanListen %v; want true, true", d.ThroughPooler(), d.CanListen())
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Open(ctx, pooled, store.WithDirectURL("mysql://x")); err == nil || !strings.Contains(err.Error(), "direct URL") {
			t.Fatalf("a bad direct URL: %v", err)
		}
	})
}
