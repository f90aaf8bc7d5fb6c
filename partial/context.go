package partial

import (
	"context"
	"errors"
	"io"
)

// ContextReader is implemented by backends whose reads can wait long: an
// object store, and the caches in front of one (a reader waiting on
// another reader's fill). ReadAtContext is ReadAtTally (t may be nil) that
// gives up when ctx ends, with an error wrapping context.Cause(ctx)
// (context.DeadlineExceeded at a deadline). A search passes its query's
// context so a stalled store cannot hold it past its deadline.
//
// Backends that never block for long (memory, local files) need not
// implement it: ReadAtContext below falls back to their ReadAt.
type ContextReader interface {
	ReadAtContext(ctx context.Context, p []byte, off int64, t *Tally) (int, error)
}

// ContextBatchReader is a BatchReader whose batches give up when ctx ends
// (each unfinished request's Err then wraps context.Cause(ctx)).
type ContextBatchReader interface {
	ReadBatchContext(ctx context.Context, reqs []ReadReq) error
}

// ContextTierReader is a TierReader whose reads give up when ctx ends.
type ContextTierReader interface {
	ReadAtTiersContext(ctx context.Context, p []byte, off int64, t *Tally) (int, error)
}

// ContextFileChecker is a FileChecker whose CheckFile can wait (an object
// store's HEAD): CheckFileContext gives up when ctx ends, with an error
// wrapping context.Cause(ctx).
type ContextFileChecker interface {
	CheckFileContext(ctx context.Context) error
}

// CheckFileContext runs fc's CheckFile under ctx where fc can wait.
func CheckFileContext(ctx context.Context, fc FileChecker) error {
	if ctx != nil {
		if cc, ok := fc.(ContextFileChecker); ok {
			return cc.CheckFileContext(ctx)
		}
	}
	return fc.CheckFile()
}

// ReadAtContext reads p at off from r under ctx: through ContextReader
// when r has it and ctx is not nil, else through TallyReader (t not nil)
// or ReadAt. The type checks cost a few nanoseconds; callers on a hot path
// assert ContextReader once when they open (as hnswsearch's readAt does).
func ReadAtContext(ctx context.Context, r io.ReaderAt, p []byte, off int64, t *Tally) (int, error) {
	if ctx != nil {
		if cr, ok := r.(ContextReader); ok {
			return cr.ReadAtContext(ctx, p, off, t)
		}
	}
	if t != nil {
		if tr, ok := r.(TallyReader); ok {
			return tr.ReadAtTally(p, off, t)
		}
	}
	return r.ReadAt(p, off)
}

// ReadBatchContext runs b's batch under ctx, through ContextBatchReader
// when b has it and ctx is not nil.
func ReadBatchContext(ctx context.Context, b BatchReader, reqs []ReadReq) error {
	if ctx != nil {
		if cb, ok := b.(ContextBatchReader); ok {
			return cb.ReadBatchContext(ctx, reqs)
		}
	}
	return b.ReadBatch(reqs)
}

// ErrStoreFailed matches the error of a request to a remote store (an
// object store) that failed for good: its attempts used up, or refused.
// Asking the same store again at once would fail the same way.
var ErrStoreFailed = errors.New("the store failed the request")

// Interrupted is the error of a read given up because ctx ended, or nil
// while ctx goes on: wraps context.Cause(ctx).
func Interrupted(ctx context.Context) error {
	if ctx == nil || ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// Done is ctx's Done channel, nil (never ready) for a nil ctx.
func Done(ctx context.Context) <-chan struct{} {
	if ctx == nil {
		return nil
	}
	return ctx.Done()
}
