package backendkit

import (
	"errors"
	"fmt"
	"io"
)

// ErrClosed is partial.ErrClosed.
var ErrClosed = errors.New("storage is closed")

// Closed is the error of an operation on the closed storage name.
func Closed(name string) error { return fmt.Errorf("%s: %w", name, ErrClosed) }

// CheckRange validates a read of n bytes at off against size, in the
// overflow-safe form: past the end fails with io.EOF at size, with
// io.ErrUnexpectedEOF across it.
func CheckRange(name string, off, n, size int64) error {
	switch {
	case off < 0:
		return fmt.Errorf("%s: read at negative offset %d", name, off)
	case n == 0 && off <= size:
		return nil
	case off >= size:
		return fmt.Errorf("%s: read of %d bytes at offset %d, file size %d: %w", name, n, off, size, io.EOF)
	case n > size-off:
		return fmt.Errorf("%s: read of %d bytes at offset %d runs past the end (file size %d): %w", name, n, off, size, io.ErrUnexpectedEOF)
	}
	return nil
}
