//go:build !linux

package partial

import (
	"errors"
	"fmt"
	"os"
)

// EvictPageCache is only implemented on Linux.
func EvictPageCache(path string) error {
	return fmt.Errorf("partial: evicting the page cache: %w", errors.ErrUnsupported)
}

// ProcessIO is only implemented on Linux.
func ProcessIO() (readBytes, rss int64, err error) {
	return 0, 0, fmt.Errorf("partial: /proc/self/io: %w", errors.ErrUnsupported)
}

// adviseRandom is a no-op where posix_fadvise is not available.
func adviseRandom(*os.File) {}
