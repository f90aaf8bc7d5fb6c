//go:build unix

package httpapi

import "syscall"

// processFiles is the process's limit on open descriptors (RLIMIT_NOFILE's
// soft limit, which Go raises to the hard one at start; 0: unknown).
func processFiles() uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return r.Cur
}
