package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// handle is one opened index in one mode. Queries hold a reference; the
// registry holds one while the handle serves. The last release closes it.
type handle struct {
	spec      LoadSpec
	path      string        // resolved inside a data root
	x         *engine.Index // the opened index
	users     users         // queries in flight, and whether the registry still serves it
	closeOnce sync.Once
	// resident is what the handle counts against the memory budget: the
	// full copy or the cache budget, plus the small arrays.
	resident atomic.Int64
	// counted is set while h serves and resident is in Registry.held
	// (Registry.memMu guards it).
	counted bool
	// reserved is what the registry admitted for this handle's open.
	reserved int64
	// files is the descriptors h holds open (handleFiles), counted in
	// fds, the registry's count, until h closes.
	files int64
	fds   *atomic.Int64
	// planned is the budget of each of caches() at open: what a cache
	// shrunk to make room for another index grows back to (regrow).
	planned []int64
	// failed holds why the handle stopped answering (its file changed under
	// it); set once, it stays until the handle is replaced.
	failed atomic.Pointer[error]
}

// markFailed records that h's file changed; it reports whether this call
// was the first to do so.
func (h *handle) markFailed(err error) bool { return h.failed.CompareAndSwap(nil, &err) }

// usable is nil while h answers queries, else the 503 it answers with.
func (h *handle) usable() error {
	if p := h.failed.Load(); p != nil {
		return h.failure(*p)
	}
	return nil
}

// failure turns an error that says h's file changed into the 503 every
// such query answers with; other errors pass through.
func (h *handle) failure(err error) error {
	if errors.Is(err, engine.ErrCorrupt) {
		return errUnprocessable("corrupt_index", fmt.Sprintf(
			"index file %s is corrupt: %v; mode full checks every neighbor list when it loads", h.spec.Path, err))
	}
	if !isFileChanged(err) {
		return err
	}
	return errUnavailable("index_file_changed", fmt.Sprintf(
		"a file this index serves (%s) changed after it was loaded: %v; reload it with PUT /indexes/{name}/_mode or DELETE it", h.spec.Path, err))
}

// checkFile compares h's files (index and rerank vectors) with what was
// opened: size, times, inode, and the path (a file replaced by rename).
func (h *handle) checkFile() error { return h.x.CheckFile() }

// checkFileContext is checkFile giving up a request to an object store
// when ctx ends.
func (h *handle) checkFileContext(ctx context.Context) error { return h.x.CheckFileContext(ctx) }

// acquire takes a lease unless the handle is retired.
func (h *handle) acquire() (lease, bool) {
	i, ok, last := h.users.enter()
	if last {
		h.close()
	}
	return lease{h, i}, ok
}

// retire is the registry letting go: the handle closes after its last query.
func (h *handle) retire() {
	if h.users.retire() {
		h.close()
	}
}

func (h *handle) close() {
	h.closeOnce.Do(func() {
		h.x.Close()
		if h.fds != nil {
			h.fds.Add(-h.files)
		}
	})
}

// cache returns the handle's block cache, if its backend has one.
func (h *handle) caches() []engine.Resizable { return h.x.Caches() }

// score is OpenSearch's translation of a distance to a score.
func score(space string, d float32) float64 { return engine.Score(space, d) }

// readsObjects reports whether h reads a file from an object store: the
// index, its vector file or its rerank vectors.
func (h *handle) readsObjects() bool {
	sp := &h.spec
	return engine.IsRemote(sp.Path) || engine.IsRemote(sp.VectorsPath) || sp.Rerank != nil && engine.IsRemote(sp.Rerank.VectorsPath)
}
