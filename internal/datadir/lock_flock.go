//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package datadir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Lock takes the data directory dir (creating it) for this process: an
// exclusive, non-blocking flock on dir/LockFile, kept until release is
// called or the process ends. Another process holding it gives a
// *HeldError at once.
func Lock(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data dir: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		pid := holder(f)
		_ = f.Close()
		return nil, &HeldError{Dir: dir, PID: pid}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock the data dir: flock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	// f stays referenced by release: were it collected, its finalizer
	// would close the descriptor and drop the lock.
	return func() { _ = f.Close() }, nil
}

// holder reads the process id the lock's holder wrote, or 0.
func holder(f *os.File) int {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}
