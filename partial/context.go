package partial

import (
	"context"
	"errors"
	"io"
)

// ReaderAt is s as an io.ReaderAt whose reads run under ctx (with no
// Tally): for parsers and other code that reads through io.ReaderAt, so a
// load or a warm-up ends with its context.
func ReaderAt(ctx context.Context, s Storage) io.ReaderAt { return boundReader{ctx, s} }

type boundReader struct {
	ctx context.Context
	s   Storage
}

func (r boundReader) ReadAt(p []byte, off int64) (int, error) {
	return r.s.ReadAtContext(r.ctx, p, off, nil)
}

// ErrStoreFailed matches the error of a request to a remote store (an
// object store) that failed for good: its attempts used up, or refused.
// Asking the same store again at once would fail the same way.
var ErrStoreFailed = errors.New("the store failed the request")

// Interrupted is the error of a read given up because ctx ended, or nil
// while ctx goes on: wraps context.Cause(ctx).
func Interrupted(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}
