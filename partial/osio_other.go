//go:build !linux

package partial

import "os"

// adviseRandom is a no-op where posix_fadvise is not available.
func adviseRandom(*os.File) {}

// adviseNormal is a no-op where posix_fadvise is not available.
func adviseNormal(*os.File) {}

// reopen opens the file at path once more (Handle.Reopen checks that it
// is still the same file).
func reopen(_ *os.File, path string) (*os.File, error) { return os.Open(path) }
