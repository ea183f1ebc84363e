package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLockHeld: a second Lock of one directory fails at once with a
// HeldError naming the directory and the holder's pid; once released, the
// directory can be taken again. (Both locks are this process's: flock
// locks belong to open file descriptions, so they conflict here as they
// do between two processes; the binary itself is tested twice on one dir
// in cmd/gatehouse.)
func TestLockHeld(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, LockFile))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid", b, err)
	}
	_, err = Lock(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "another gatehouse") {
		t.Fatalf("second Lock: %v", err)
	}
	release()
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}
