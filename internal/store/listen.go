package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"entgo.io/ent/dialect"
	"github.com/jackc/pgx/v5"
)

// listenRetry is the wait before reconnecting a lost LISTEN connection.
const listenRetry = time.Second

// Listen runs until ctx ends, calling onNotify for every Postgres
// notification on channel (see NOTIFY), and once more after each
// (re)connection, since notifications sent while disconnected are lost.
// It holds one dedicated session connection outside the pools (to the
// direct URL when one was given) and reconnects after a failure. On
// SQLite there is nothing to listen to, and through a pooler without a
// direct URL no session to listen on (see CanListen): it returns at once.
func (d *DB) Listen(ctx context.Context, channel string, onNotify func(), log *slog.Logger) {
	if d.Dialect != dialect.Postgres || !d.CanListen() {
		return
	}
	for ctx.Err() == nil {
		err := d.listenOnce(ctx, channel, onNotify)
		if ctx.Err() != nil {
			return
		}
		log.Warn("postgres LISTEN connection lost; reconnecting", "channel", channel, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(listenRetry):
		}
	}
}

func (d *DB) listenOnce(ctx context.Context, channel string, onNotify func()) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.Connect(cctx, d.sessionURL())
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	onNotify()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		onNotify()
	}
}

// Notify sends a notification on channel through c: inside a transaction
// it is delivered when the transaction commits, and not at all if it rolls
// back. Postgres only; a no-op on SQLite.
func Notify(ctx context.Context, c interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}, dialectName, channel string) error {
	if dialectName != dialect.Postgres {
		return nil
	}
	_, err := c.ExecContext(ctx, "SELECT pg_notify($1, '')", channel)
	return err
}
