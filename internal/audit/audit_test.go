package audit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/ent/auditevent"
	"gatehouse/internal/audit"
	"gatehouse/internal/config"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// retention is GATEHOUSE_AUDIT_RETENTION's default: the one its
// declaration in internal/config gives, the service having none.
var retention = config.Defaults().Audit.Retention

// newService is audit.NewService, failing the test on an error.
func newService(t *testing.T, db *store.DB, log *slog.Logger, opt audit.Options) *audit.Service {
	t.Helper()
	svc, err := audit.NewService(db, log, opt)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// seed appends n events at time at, for key id.
func seed(t *testing.T, svc *audit.Service, n int, at time.Time) {
	t.Helper()
	for i := range n {
		if err := svc.Record(context.Background(), audit.Event{
			Time: at.Add(time.Duration(i) * time.Millisecond), APIKeyID: 1, APIKeyName: "k", Mutation: "createSku",
			TargetType: "Sku", Outcome: audit.Success,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAppendOnly: events are created; updating or deleting them through
// the Ent client is refused, alone or in bulk, in a transaction or not.
func TestAppendOnly(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		svc := newService(t, db, quiet(), audit.Options{})
		ctx := context.Background()
		err := svc.Record(ctx, audit.Event{APIKeyID: 7, APIKeyName: strings.Repeat("é", 300), Mutation: "payOrder",
			TargetType: "Order", TargetID: "SO-1", Outcome: audit.Refused, ErrorCode: "INVALID_STATE", RequestID: "req-1"})
		if err != nil {
			t.Fatal(err)
		}
		e, err := db.AuditEvent.Query().Only(ctx)
		if err != nil || *e.TargetID != "SO-1" || *e.ErrorCode != "INVALID_STATE" || e.Time.IsZero() || len(e.APIKeyName) > 512 {
			t.Fatalf("recorded %+v, %v", e, err)
		}
		for name, change := range map[string]func() error{
			"update one": func() error { return db.AuditEvent.UpdateOneID(e.ID).Exec(ctx) },
			"update all": func() error { return db.AuditEvent.Update().Exec(ctx) },
			"delete one": func() error { return db.AuditEvent.DeleteOneID(e.ID).Exec(ctx) },
			"delete all": func() error { _, err := db.AuditEvent.Delete().Exec(ctx); return err },
			"delete in a transaction": func() error {
				tx, err := db.Tx(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				_, err = tx.AuditEvent.Delete().Exec(ctx)
				return err
			},
		} {
			if err := change(); !errors.Is(err, audit.ErrAppendOnly) {
				t.Fatalf("%s: %v, want ErrAppendOnly", name, err)
			}
		}
		if n := db.AuditEvent.Query().Where(auditevent.OutcomeEQ(audit.Refused)).CountX(ctx); n != 1 {
			t.Fatalf("%d refused events left", n)
		}
	})
}

// TestRetention: Purge deletes exactly the events older than the cut-off,
// in batches; the job started by Start does it at once and again later.
func TestRetention(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		svc := newService(t, db, quiet(), audit.Options{RetentionBatch: 7})
		ctx := context.Background()
		now := time.Now()
		seed(t, svc, 30, now.Add(-400*24*time.Hour)) // older than a year
		seed(t, svc, 5, now.Add(-time.Hour))
		n, err := svc.Purge(ctx, now.Add(-retention))
		if err != nil || n != 30 {
			t.Fatalf("purged %d, %v; want 30", n, err)
		}
		if left := db.AuditEvent.Query().CountX(ctx); left != 5 {
			t.Fatalf("%d events left, want the 5 recent ones", left)
		}
		if n, err := svc.Purge(ctx, now.Add(-retention)); err != nil || n != 0 {
			t.Fatalf("second purge: %d, %v", n, err)
		}

		// The job: retention 30 min, run at start and every 20 ms.
		clock := now
		var mu sync.Mutex
		job := newService(t, db, quiet(), audit.Options{Retention: 30 * time.Minute, RetentionEvery: 20 * time.Millisecond,
			Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
		jctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); job.Start(jctx) }()
		defer func() { cancel(); <-done }()
		waitCount(t, db, 0, "the job deletes the events older than 30 min at start")
		seed(t, svc, 3, now.Add(30*time.Minute))
		mu.Lock()
		clock = now.Add(time.Hour + time.Minute) // the new events are now 31 min old
		mu.Unlock()
		waitCount(t, db, 0, "the job runs again")
	})
}

// TestKeptForever: Retention 0 is GATEHOUSE_AUDIT_RETENTION's 0, as it
// is: the job does nothing and old events stay. A negative retention
// (forever's old spelling) is refused at construction.
func TestKeptForever(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		svc := newService(t, db, quiet(), audit.Options{RetentionEvery: time.Millisecond})
		seed(t, svc, 3, time.Now().Add(-10*retention))
		done := make(chan struct{})
		go func() { defer close(done); svc.Start(context.Background()) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the retention job runs with Retention 0")
		}
		if n := db.AuditEvent.Query().CountX(context.Background()); n != 3 {
			t.Fatalf("%d events left, want all 3", n)
		}
		if _, err := audit.NewService(db, quiet(), audit.Options{Retention: -1}); err == nil {
			t.Fatal("a negative retention was accepted")
		}
	})
}

// TestRetentionReplicas: two replicas purging at once delete every old
// event exactly once between them and no recent one (on Postgres they
// take disjoint batches).
func TestRetentionReplicas(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db1 := storetest.Open(t, b)
		var db2 *store.DB = db1
		if !b.Embedded() {
			db2 = storetest.OpenURL(t, b.DatabaseURL)
		}
		s1 := newService(t, db1, quiet(), audit.Options{RetentionBatch: 10})
		s2 := newService(t, db2, quiet(), audit.Options{RetentionBatch: 10})
		now := time.Now()
		seed(t, s1, 200, now.Add(-9000*time.Hour))
		seed(t, s1, 4, now)
		var wg sync.WaitGroup
		counts := make([]int, 2)
		errs := make([]error, 2)
		for i, s := range []*audit.Service{s1, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i], errs[i] = s.Purge(context.Background(), now.Add(-retention))
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		// A replica stops when its batch comes back short (the other holds
		// the rest): purging again finishes what is left.
		more, err := s1.Purge(context.Background(), now.Add(-retention))
		if err != nil || counts[0]+counts[1]+more != 200 {
			t.Fatalf("deleted %d + %d + %d, want 200 (%v)", counts[0], counts[1], more, err)
		}
		if left := db1.AuditEvent.Query().CountX(context.Background()); left != 4 {
			t.Fatalf("%d events left, want 4", left)
		}
	})
}

func waitCount(t *testing.T, db *store.DB, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.AuditEvent.Query().Where(auditevent.TimeLT(time.Now().Add(24*time.Hour))).CountX(context.Background()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
