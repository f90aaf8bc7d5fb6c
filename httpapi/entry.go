package httpapi

import (
	"context"
	"sync"
	"sync/atomic"
)

// entry is one named index: the handle serving it and its statistics.
type entry struct {
	name    string
	cur     atomic.Pointer[handle]
	mu      sync.Mutex // one load or switch at a time (a delete never waits for it)
	stats   queryStats
	state   atomic.Value // string: "loading", "serving", "switching"
	lastErr atomic.Value // string: why the last switch failed
	// deleted is set by Delete; cancel ends the switch in progress, if any.
	deleted  atomic.Bool
	cancelMu sync.Mutex
	cancel   context.CancelFunc
	// life ends when the index is deleted, with notFound as its cause:
	// the loads, switches and warm-ups under way give up their reads.
	life context.Context
	end  context.CancelCauseFunc
	// building is the progress of an on_disk guide being built for a load
	// or switch: bytes read and total (nil when none is).
	building atomic.Pointer[[2]int64]
	// checking is set while the file watcher checks the entry's files;
	// recheck asks that check to run once more (watcher.check).
	checking, recheck atomic.Bool
	// adm admits the index's searches within its share of the server's
	// slots and queue (indexAdmission), so one whose storage stalls (an
	// object store that stops answering) cannot starve the others.
	adm *admission
}

// setCancel records (or, with nil, clears) the running switch's cancel.
func (e *entry) setCancel(c context.CancelFunc) {
	e.cancelMu.Lock()
	e.cancel = c
	e.cancelMu.Unlock()
}

// cancelSwitch ends a switch in progress (DELETE).
func (e *entry) cancelSwitch() {
	e.cancelMu.Lock()
	if e.cancel != nil {
		e.cancel()
	}
	e.cancelMu.Unlock()
}

// lease takes a lease on the handle serving e.
func (e *entry) lease() (lease, error) {
	for {
		h := e.cur.Load()
		if h == nil {
			return lease{}, errIndexNotFound(e.name)
		}
		if l, ok := h.acquire(); ok {
			return l, nil
		}
	}
}
