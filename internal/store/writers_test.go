package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// Writers of one process take turns: each waits for the one before it,
// however many there are, and a writer whose request gives up waiting is
// told so at its own deadline (503), not after SQLite's busy timeout.
func TestWritersTakeTurns(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		tk, err := db.Ticket.Create().SetTitle("contended").Save(ctx)
		if err != nil {
			t.Fatal(err)
		}

		// 40 writers, each holding its transaction for 5 ms: on SQLite they
		// queue for the one write lock, on Postgres for the row lock.
		const n = 40
		var wg sync.WaitGroup
		errc := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				defer cancel()
				tx, err := db.Tx(ctx)
				if err != nil {
					errc <- fmt.Errorf("writer %d: begin: %w", i, err)
					return
				}
				if err := tx.Ticket.UpdateOneID(tk.ID).SetTitle(fmt.Sprintf("w%d", i)).Exec(ctx); err != nil {
					_ = tx.Rollback()
					errc <- fmt.Errorf("writer %d: update: %w", i, err)
					return
				}
				time.Sleep(5 * time.Millisecond)
				if err := tx.Commit(); err != nil {
					errc <- fmt.Errorf("writer %d: commit: %w", i, err)
				}
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}

		if !b.Embedded() {
			return
		}
		// A transaction holds SQLite's write lock; a writer with a 200 ms
		// deadline gives up at its deadline, as a dependency failure.
		tx, err := db.Tx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := tx.Ticket.UpdateOneID(tk.ID).SetTitle("holder").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		began := time.Now()
		_, err = db.Ticket.Create().SetTitle("late").Save(short)
		waited := time.Since(began)
		if !errors.Is(err, errs.Unavailable) && !store.IsUnavailable(err) {
			t.Fatalf("write behind a held lock: %v, want unavailable", err)
		}
		if waited > 3*time.Second {
			t.Fatalf("gave up after %s, want about its 200 ms deadline", waited)
		}
		// Once the holder ends, the next writer gets its turn.
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Ticket.Create().SetTitle("next").Save(ctx); err != nil {
			t.Fatalf("write after the holder ended: %v", err)
		}
	})
}
