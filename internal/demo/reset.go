package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"gatehouse/internal/config"
)

// ResetDir is the folder of the data directory where Reset keeps the
// database it replaced (one copy: the previous reset's is overwritten).
const ResetDir = "before-reset"

// Reset starts the embedded demo afresh (`serve --demo --reset`): it moves
// the SQLite database (with its -wal and -shm files, which hold commits not
// yet checkpointed) to <data dir>/before-reset/, so that the start creates
// and seeds a new one. The dev keys and the replay memory stay: the demo's
// derived webhook secret is unchanged and used signed URLs stay used.
//
// It refuses with Postgres (a shared database is never wiped by a flag:
// drop and create it instead), and while either listener's address is
// taken, as by a demo still running on the file.
func Reset(cfg config.Config, log *slog.Logger) error {
	if !cfg.Embedded() {
		return errors.New("--reset: refused with a Postgres database: it starts afresh only the embedded demo's SQLite file; " +
			"to start a Postgres demo afresh, drop and create its database yourself (dropdb, createdb) and start with --demo")
	}
	for _, addr := range []string{cfg.Server.Addr, cfg.Server.AdminAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("--reset: refused: %s is in use; is the demo still running? Stop it first (Ctrl-C): %w", addr, err)
		}
		_ = l.Close()
	}
	db := strings.TrimPrefix(cfg.Database.URL, "sqlite:")
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		log.Info("demo reset: no database yet; seeding a new one", "file", db)
		return nil
	}
	keep := filepath.Join(cfg.Database.DataDir, ResetDir)
	if err := os.MkdirAll(keep, 0o700); err != nil {
		return fmt.Errorf("--reset: %w", err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		dst := filepath.Join(keep, filepath.Base(db)+suffix)
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--reset: %w", err)
		}
		if err := os.Rename(db+suffix, dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--reset: %w", err)
		}
	}
	log.Warn("demo reset: the previous database was moved aside; seeding the demo afresh", "moved_to", filepath.Join(keep, filepath.Base(db)))
	return nil
}
