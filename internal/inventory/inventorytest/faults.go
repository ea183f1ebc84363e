// Package inventorytest injects failures into stock deductions for tests,
// inside the database: a deduction is one statement (Postgres) or one
// short transaction (SQLite), so there is no point in the Go code between
// its decrement and its commit where a hook could sit. The faults are
// triggers on the test's own database, fired by the real statements, so
// the tests exercise exactly the code that runs in production.
package inventorytest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/internal/store"
)

// exec runs DDL on db, failing the test on error.
func exec(t testing.TB, db *store.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.SQL.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// FailDecrement makes every decrement of SKU skuID fail right after the
// row was changed, with an error the database raises with message msg:
// an unexpected error of the deduction itself (not a dependency failure).
// The returned function removes the fault (it is also removed at cleanup).
func FailDecrement(t testing.TB, db *store.DB, skuID int, msg string) (remove func()) {
	t.Helper()
	name := fmt.Sprintf("test_fail_decrement_%d", skuID)
	msg = strings.ReplaceAll(msg, "'", "''")
	if db.Dialect == dialect.Postgres {
		exec(t, db,
			`CREATE FUNCTION `+name+`() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '`+msg+`'; END $$`,
			fmt.Sprintf(`CREATE TRIGGER %s AFTER UPDATE OF stock ON skus FOR EACH ROW WHEN (NEW.id = %d) EXECUTE FUNCTION %s()`, name, skuID, name))
		return cleanup(t, db, `DROP TRIGGER IF EXISTS `+name+` ON skus`, `DROP FUNCTION IF EXISTS `+name+`()`)
	}
	exec(t, db, fmt.Sprintf(`CREATE TRIGGER %s AFTER UPDATE OF stock ON skus FOR EACH ROW WHEN NEW.id = %d BEGIN SELECT RAISE(ABORT, '%s'); END`, name, skuID, msg))
	return cleanup(t, db, `DROP TRIGGER IF EXISTS `+name)
}

// StallDecrement (Postgres) makes every decrement of SKU skuID sleep for d
// inside its statement, after the row was changed and while it is
// locked: the database "stops answering" in the middle of a deduction.
func StallDecrement(t testing.TB, db *store.DB, skuID int, d time.Duration) (remove func()) {
	t.Helper()
	postgresOnly(t, db)
	name := fmt.Sprintf("test_stall_decrement_%d", skuID)
	exec(t, db,
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(%f); RETURN NEW; END $$`, name, d.Seconds()),
		fmt.Sprintf(`CREATE TRIGGER %s AFTER UPDATE OF stock ON skus FOR EACH ROW WHEN (NEW.id = %d) EXECUTE FUNCTION %s()`, name, skuID, name))
	return cleanup(t, db, `DROP TRIGGER IF EXISTS `+name+` ON skus`, `DROP FUNCTION IF EXISTS `+name+`()`)
}

// HoldDecrement (Postgres) makes every decrement of SKU skuID wait, inside
// its statement and with the row locked, until release is called. The
// wait is on an advisory lock the test holds, so a held deduction shows in
// pg_stat_activity as waiting on a lock.
func HoldDecrement(t testing.TB, db *store.DB, skuID int) (release func()) {
	t.Helper()
	postgresOnly(t, db)
	ctx := context.Background()
	key := 0x6761746568 + int64(skuID) // "gateh" + the SKU
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("test_hold_decrement_%d", skuID)
	exec(t, db,
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NEW; END $$`, name, key),
		fmt.Sprintf(`CREATE TRIGGER %s AFTER UPDATE OF stock ON skus FOR EACH ROW WHEN (NEW.id = %d) EXECUTE FUNCTION %s()`, name, skuID, name))
	unlocked := false
	release = func() {
		if unlocked {
			return
		}
		unlocked = true
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
			t.Error(err)
		}
		_ = conn.Close()
	}
	// Cleanups run last first: the held statements go on before the
	// trigger is dropped (the drop waits for them).
	cleanup(t, db, `DROP TRIGGER IF EXISTS `+name+` ON skus`, `DROP FUNCTION IF EXISTS `+name+`()`)
	t.Cleanup(release)
	return release
}

// FailCommit (Postgres) makes the commit of every deduction whose biz_no
// starts with prefix fail with a serialization failure (a transient
// refusal by the database, raised by a deferred constraint trigger when
// the deduction's transaction commits).
func FailCommit(t testing.TB, db *store.DB, prefix string) (remove func()) {
	t.Helper()
	postgresOnly(t, db)
	name := "test_fail_commit"
	exec(t, db,
		`CREATE FUNCTION `+name+`() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected commit failure' USING ERRCODE = 'serialization_failure'; END $$`,
		`CREATE CONSTRAINT TRIGGER `+name+` AFTER INSERT OR UPDATE ON idempotency_records DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (starts_with(NEW.biz_no, '`+strings.ReplaceAll(prefix, "'", "''")+`')) EXECUTE FUNCTION `+name+`()`)
	return cleanup(t, db, `DROP TRIGGER IF EXISTS `+name+` ON idempotency_records`, `DROP FUNCTION IF EXISTS `+name+`()`)
}

// WaitForLockWaiters waits (up to 20 s) until n sessions of db's Postgres
// database are blocked on a lock.
func WaitForLockWaiters(t testing.TB, db *store.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got int
		err := db.SQL.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got)
		if err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d sessions blocked on a lock (%d)", n, got)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for work
	}
}

// WaitForIdle waits (up to 20 s) until no other session of db's Postgres
// database is running a statement or inside a transaction: whatever a
// deduction cut off from its caller was going to commit is committed by
// then.
func WaitForIdle(t testing.TB, db *store.DB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var busy int
		err := db.SQL.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND (state = 'active' OR state LIKE 'idle in transaction%')`).Scan(&busy)
		if err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still busy after 20 s", busy)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for work
	}
}

func postgresOnly(t testing.TB, db *store.DB) {
	t.Helper()
	if db.Dialect != dialect.Postgres {
		t.Fatal("inventorytest: this fault needs Postgres")
	}
}

// cleanup returns a function running stmts once, also registered to run
// at the test's cleanup.
func cleanup(t testing.TB, db *store.DB, stmts ...string) func() {
	done := false
	f := func() {
		if done {
			return
		}
		done = true
		for _, s := range stmts {
			if _, err := db.SQL.ExecContext(context.Background(), s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	}
	t.Cleanup(f)
	return f
}
