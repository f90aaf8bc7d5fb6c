package partial

import (
	"sync"
	"sync/atomic"
)

// life counts the users of a backend's resources so Close never frees
// memory (or unmaps it) under a reader. state = users<<1 | closed.
type life struct {
	state atomic.Int64
	once  sync.Once
	free  func() error // releases the resources; runs exactly once
	err   error
}

// acquire registers a user; false after Close.
func (l *life) acquire() bool {
	if l.state.Add(2)&1 != 0 {
		l.release()
		return false
	}
	return true
}

func (l *life) release() {
	if l.state.Add(-2) == 1 {
		l.finish()
	}
}

func (l *life) finish() error {
	l.once.Do(func() {
		if l.free != nil {
			l.err = l.free()
		}
	})
	return l.err
}

// close marks the backend closed and frees it now if nobody uses it, or
// when the last user releases it. A second close returns ErrClosed.
func (l *life) close(name string) error {
	for {
		s := l.state.Load()
		if s&1 != 0 {
			return closedErr(name)
		}
		if l.state.CompareAndSwap(s, s|1) {
			if s == 0 {
				return l.finish()
			}
			return nil
		}
	}
}
