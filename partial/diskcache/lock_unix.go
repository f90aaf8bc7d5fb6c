//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package diskcache

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile opens path and takes an exclusive flock on it, failing at once
// when another process holds it.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("in use by another process (one process per cache directory)")
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// fdLimit is the process's soft limit on open descriptors (0: unknown).
func fdLimit() uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return r.Cur
}

// unlockFile releases lockFile's lock.
func unlockFile(f *os.File) error { return f.Close() }
