//go:build !linux

package partial

import (
	"errors"
	"fmt"
)

// OpenDirect is only implemented on Linux.
func OpenDirect(path string, parallel int, opts ...OpenOption) (Storage, error) {
	return nil, fmt.Errorf("direct I/O on this OS: %w", errors.ErrUnsupported)
}

// NewDirect is only implemented on Linux; it closes h.
func NewDirect(h *Handle, parallel int) (Storage, error) {
	h.Close()
	return nil, fmt.Errorf("direct I/O on this OS: %w", errors.ErrUnsupported)
}
