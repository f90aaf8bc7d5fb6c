//go:build !linux

package main

import (
	"errors"
	"fmt"
)

// evictPageCache is only implemented on Linux.
func evictPageCache(path string) error {
	return fmt.Errorf("evicting the page cache: %w", errors.ErrUnsupported)
}

// processIO is only implemented on Linux.
func processIO() (readBytes, rss int64, err error) {
	return 0, 0, fmt.Errorf("/proc/self/io: %w", errors.ErrUnsupported)
}
