//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package diskcache

import "os"

// lockFile opens path; without flock another process is not kept out.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

func unlockFile(f *os.File) error { return f.Close() }

// fdLimit is unknown here.
func fdLimit() uint64 { return 0 }
