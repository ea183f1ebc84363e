package store_test

import (
	"context"
	"testing"
	"time"

	"gatehouse/ent/ticket"
	"gatehouse/internal/errs"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// unenforced carries a deadline that nothing on the client side enforces
// (its Done is nil): what the server sees when the client could not
// cancel in time, e.g. because the server was frozen.
type unenforced struct {
	context.Context
	deadline time.Time
}

func (c unenforced) Deadline() (time.Time, bool) { return c.deadline, true }

// A single write on Postgres (one Ent create or update outside a
// transaction) carries its caller's deadline to the server: a write the
// server finishes only after it (a trigger makes each take 300 ms) is
// rolled back there and reported as unavailable, whether it returns rows
// (INSERT … RETURNING) or not (UPDATE); the same writes with time to
// spare commit.
func TestPostgresWriteAfterDeadline(t *testing.T) {
	db := storetest.OpenURL(t, testenv.PostgresURL(t))
	ctx := context.Background()
	for _, q := range []string{
		`CREATE FUNCTION test_slow_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$`,
		`CREATE TRIGGER test_slow_write BEFORE INSERT OR UPDATE ON tickets FOR EACH ROW EXECUTE FUNCTION test_slow_write()`,
	} {
		if _, err := db.SQL.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	late := func() context.Context { return unenforced{ctx, time.Now().Add(100 * time.Millisecond)} }
	inTime := func() context.Context { return unenforced{ctx, time.Now().Add(10 * time.Second)} }
	count := func(title string) int {
		t.Helper()
		n, err := db.Ticket.Query().Where(ticket.Title(title)).Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, err := db.Ticket.Create().SetTitle("late").SetCreatedAt(time.Now()).Save(late()); errs.KindOf(err) != errs.Unavailable {
		t.Fatalf("insert finished past its deadline: %v, want unavailable", err)
	}
	if n := count("late"); n != 0 {
		t.Fatalf("%d rows of an insert finished past its deadline", n)
	}
	if _, err := db.Ticket.Create().SetTitle("in time").SetCreatedAt(time.Now()).Save(inTime()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Ticket.Update().Where(ticket.Title("in time")).SetTitle("renamed").Save(late()); errs.KindOf(err) != errs.Unavailable {
		t.Fatalf("update finished past its deadline: %v, want unavailable", err)
	}
	if n := count("in time"); n != 1 {
		t.Fatalf("update finished past its deadline was kept (%d rows left as they were)", n)
	}
	if n, err := db.Ticket.Update().Where(ticket.Title("in time")).SetTitle("renamed").Save(inTime()); err != nil || n != 1 {
		t.Fatalf("update in time: %d, %v", n, err)
	}
	if n := count("renamed"); n != 1 {
		t.Fatalf("%d renamed rows, want 1", n)
	}
}

// ClockOffset reads the database server's clock against this process's:
// zero on SQLite (one clock), and on the test's Postgres (same host) well
// under the second from which gatehouse warns at start.
func TestClockOffset(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		off, err := db.ClockOffset(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if b.Embedded() && off != 0 {
			t.Fatalf("SQLite offset %v, want 0", off)
		}
		if off > 200*time.Millisecond || off < -200*time.Millisecond {
			t.Fatalf("offset %v from a database on this host", off)
		}
		done, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := db.ClockOffset(done); !b.Embedded() && errs.KindOf(err) != errs.Unavailable {
			t.Fatalf("cancelled: %v, want unavailable", err)
		}
	})
}
