// Package datadir guards the embedded data directory: one serving
// gatehouse at a time. Two processes on one SQLite file work, slowly, but
// one of them started with --reset moves the database from under the
// other, whose next commits are then lost; so `gatehouse serve` on the
// embedded database holds an exclusive lock on a file in the data
// directory for as long as it runs, and a second one exits at once.
package datadir

import (
	"fmt"
	"path/filepath"
)

// LockFile is the name of the lock file in the data directory. It holds
// the process id of the gatehouse that last held it; the lock itself is
// the kernel's (flock), released when that process ends however it ends,
// so a leftover file never blocks a start.
const LockFile = "gatehouse.lock"

// HeldError is the error of Lock when another process holds the lock.
type HeldError struct {
	Dir string // the data directory
	PID int    // the holder's process id, 0 when unknown
}

func (e *HeldError) Error() string {
	who := "another gatehouse"
	if e.PID > 0 {
		who = fmt.Sprintf("another gatehouse (pid %d)", e.PID)
	}
	return fmt.Sprintf("the data dir %s is in use: %s serves from it and holds %s; is the demo still running? "+
		"Stop it first (Ctrl-C), or give this one a data dir of its own (GATEHOUSE_DATA_DIR)",
		e.Dir, who, filepath.Join(e.Dir, LockFile))
}
