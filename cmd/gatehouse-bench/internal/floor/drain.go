package floor

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/internal/store"
)

// floorBatch is how many rows a worker of the minimal outbox loop claims
// at once.
const floorBatch = 8

// RunDrain runs one floor of the webhook drain to the harness's sink and
// exits when every message was sent (`gatehouse-bench floor …`):
//
//	post:           a bare Go client POSTing n messages, workers at once;
//	outbox-sqlite,
//	outbox-pg:      the minimal outbox loop: n rows queued in a table of its
//	                own (before the clock), then workers that each claim
//	                floorBatch rows with one UPDATE … RETURNING (SKIP LOCKED
//	                on Postgres), POST them, and mark each sent with one
//	                UPDATE. No signing, no attempt log, no schedule: what
//	                any transactional outbox must at least do.
func RunDrain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	mode := fs.String("mode", "post", "post, outbox-sqlite or outbox-pg")
	target := fs.String("sink", "", "URL to POST to")
	n := fs.Int("n", 5000, "messages")
	workers := fs.Int("workers", 16, "concurrent POSTs")
	sqlitePath := fs.String("sqlite", "", "outbox-sqlite: database file")
	sqliteSync := fs.String("sqlite-sync", bench.DefaultSQLiteSync, "outbox-sqlite: synchronous setting (gatehouse's GATEHOUSE_SQLITE_SYNC): full or normal")
	pgURL := fs.String("postgres", "", "outbox-pg: database URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *workers, MaxIdleConns: *workers}, Timeout: 10 * time.Second}
	body := floorMessage(*target)
	post := func(url, body string) error {
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("sink answered %d", resp.StatusCode)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	switch *mode {
	case "post":
		var left atomic.Int64
		left.Store(int64(*n))
		for range *workers {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := post(*target, body); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	case "outbox-sqlite", "outbox-pg":
		db, err := openFloorOutbox(ctx, *mode, *sqlitePath, *sqliteSync, *pgURL, *n, *target, body)
		if err != nil {
			return err
		}
		defer db.Close()
		claim := outboxClaim(*mode)
		for range *workers {
			wg.Go(func() { outboxWorker(ctx, db, claim, post, errs) })
		}
	default:
		return fmt.Errorf("unknown floor mode %q", *mode)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// outboxClaim is the statement a worker of the minimal outbox loop claims
// floorBatch rows with. On SQLite the batch size is written +$2: a bound
// LIMIT makes SQLite prepare the statement again on every run (gatehouse
// writes its own limits the same way, see the webhook package's
// sqliteLimits), and the floor should not pay for what gatehouse avoids.
func outboxClaim(mode string) string {
	claim := `UPDATE bench_outbox SET lease_until = $1 WHERE id IN (SELECT id FROM bench_outbox WHERE status = 0 AND lease_until IS NULL ORDER BY id LIMIT +$2) RETURNING id, url, body`
	if mode == "outbox-pg" {
		claim = strings.Replace(claim, "LIMIT +$2)", "LIMIT $2 FOR UPDATE SKIP LOCKED)", 1)
	}
	return claim
}

// outboxWorker claims, POSTs and marks sent batches of the outbox until
// none is left; its first error goes to errs.
func outboxWorker(ctx context.Context, db *sql.DB, claim string, post func(url, body string) error, errs chan<- error) {
	for {
		rows, err := db.QueryContext(ctx, claim, time.Now().Add(30*time.Second).UTC(), floorBatch)
		if err != nil {
			errs <- err
			return
		}
		type msg struct {
			id        int64
			url, body string
		}
		var batch []msg
		for rows.Next() {
			var m msg
			if err := rows.Scan(&m.id, &m.url, &m.body); err != nil {
				errs <- err
			}
			batch = append(batch, m)
		}
		rows.Close()
		if len(batch) == 0 {
			return
		}
		for _, m := range batch {
			if err := post(m.url, m.body); err != nil {
				errs <- err
				return
			}
			if _, err := db.ExecContext(ctx, `UPDATE bench_outbox SET status = 1, lease_until = NULL WHERE id = $1`, m.id); err != nil {
				errs <- err
				return
			}
		}
	}
}

// floorMessage is a webhook message of the usual size.
func floorMessage(target string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"eventType":"bench.event","bizData":"{\"order_no\":\"SO1001\",\"amount\":99.90,\"status\":\"PAID\",\"create_time\":\"2026-11-22T10:43:47.120Z\",\"pay_time\":\"2026-11-22T10:43:58.278Z\"}","callbackUrl":%q,"retryCount":0,"maxRetry":5,"createTime":%d}`,
		target, time.Now().UnixMilli())
	return b.String()
}

// openFloorOutbox creates the floor's table (gatehouse's SQLite settings,
// or the Postgres pool size) and queues n messages to target.
func openFloorOutbox(ctx context.Context, mode, sqlitePath, sqliteSync, pgURL string, n int, target, body string) (*sql.DB, error) {
	var (
		db  *sql.DB
		err error
		ddl = `CREATE TABLE bench_outbox (id BIGSERIAL PRIMARY KEY, url TEXT NOT NULL, body TEXT NOT NULL, status INTEGER NOT NULL DEFAULT 0, lease_until TIMESTAMPTZ)`
	)
	if mode == "outbox-sqlite" {
		db, err = sql.Open("sqlite", store.SQLiteDSN(sqlitePath, sqliteSync))
		if err == nil {
			db.SetMaxOpenConns(8)
		}
		ddl = `CREATE TABLE bench_outbox (id INTEGER PRIMARY KEY, url TEXT NOT NULL, body TEXT NOT NULL, status INTEGER NOT NULL DEFAULT 0, lease_until DATETIME)`
	} else {
		db, err = sql.Open("pgx", pgURL)
		if err == nil {
			db.SetMaxOpenConns(40)
			db.SetMaxIdleConns(20)
		}
	}
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS bench_outbox`); err != nil {
		db.Close()
		return nil, err
	}
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		db.Close()
		return nil, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		db.Close()
		return nil, err
	}
	for i := 0; i < n; i += 500 {
		var q strings.Builder
		q.WriteString(`INSERT INTO bench_outbox (url, body) VALUES `)
		var args []any
		for j := i; j < min(i+500, n); j++ {
			if j > i {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "($%d, $%d)", len(args)+1, len(args)+2)
			args = append(args, target, body)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			_ = tx.Rollback()
			db.Close()
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
