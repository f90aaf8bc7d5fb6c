//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDemoDir creates dir's lock file already locked: it is locked under
// a temporary name and renamed (the lock goes with the file), so no other
// server finds it unlocked while this one starts.
func lockDemoDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, demoLockName+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, demoLockName)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// tryLockStale locks path when no process holds it (ok false when one
// does, or there is no such file).
func tryLockStale(path string) (*os.File, bool) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, false
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil, false
	}
	return f, true
}
