package backendkit

import (
	"sync"
	"sync/atomic"
)

// Life counts the users of a backend's resources so Close never frees
// memory (or unmaps it) under a reader. state = users<<1 | closed.
type Life struct {
	state atomic.Int64
	once  sync.Once
	// Free releases the resources; it runs exactly once.
	Free func() error
	err  error
}

// Acquire registers a user; false after Close.
func (l *Life) Acquire() bool {
	if l.state.Add(2)&1 != 0 {
		l.Release()
		return false
	}
	return true
}

// Release ends a use Acquire began.
func (l *Life) Release() {
	if l.state.Add(-2) == 1 {
		l.finish()
	}
}

func (l *Life) finish() error {
	l.once.Do(func() {
		if l.Free != nil {
			l.err = l.Free()
		}
	})
	return l.err
}

// Close marks the backend closed and frees it now if nobody uses it, or
// when the last user releases it. A second Close returns Closed(name).
func (l *Life) Close(name string) error {
	for {
		s := l.state.Load()
		if s&1 != 0 {
			return Closed(name)
		}
		if l.state.CompareAndSwap(s, s|1) {
			if s == 0 {
				return l.finish()
			}
			return nil
		}
	}
}
