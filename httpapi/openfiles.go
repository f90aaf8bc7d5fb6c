package httpapi

import (
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// Every served index holds its files open for as long as it serves. The
// registry counts the descriptors they hold and refuses a load that would
// take the count past Limits.MaxOpenFiles, so that the indexes cannot use
// up the process's descriptors: past that, accept fails and connections
// stall, and every other open fails.

// ownFiles is what MaxOpenFiles' default leaves the server beside its
// connections: the listener, the logs, the file watcher, an object
// store's pooled connections, a switch's second handle for a moment.
const ownFiles = 256

// defaultOpenFiles is MaxOpenFiles' default for a process limited to
// nofile descriptors (0: unknown, no bound) with conns client connections
// and cacheFiles disk cache block files open at most: what those and
// ownFiles leave, at least a quarter of it.
func defaultOpenFiles(nofile uint64, conns int, cacheFiles int64) int64 {
	if nofile == 0 || nofile > 1<<40 {
		return 1 << 40
	}
	n := int64(nofile)
	return max(n-int64(conns)-ownFiles-cacheFiles, n/4)
}

// storageFiles is what one file read through backend holds open: its
// descriptor, and with direct I/O three io_uring rings (a shared one and
// partial's ownedRings); none in mode full (the file is read whole and
// closed) or for an object (connections are pooled, not held).
func storageFiles(path string, backend engine.Backend) int64 {
	switch {
	case path == "" || engine.IsRemote(path) || backend == engine.BackendMemory:
		return 0
	case backend == engine.BackendDirect:
		return 4
	}
	return 1
}

// handleFiles is what a handle serving spec (as servedSpec made it) holds
// open: its index, its separate vector file and its rerank vectors, each
// opened on its own (TestOpenFilesCounted checks it against the process).
func handleFiles(spec LoadSpec) int64 {
	n := storageFiles(spec.Path, spec.Backend) + storageFiles(spec.VectorsPath, spec.Backend)
	if rs := spec.Rerank; rs != nil {
		backend := engine.BackendPread // one descriptor, whatever the strategy reads with
		if rs.Strategy == engine.DefaultRerankStrategy {
			backend = engine.BackendDirect
		}
		n += storageFiles(rs.VectorsPath, backend)
	}
	return n
}

// besideFiles is what the handle a switch of e replaces holds open (0
// for a load): the count may pass MaxOpenFiles by that much until the
// handle closes.
func besideFiles(e *entry) int64 {
	if old := e.cur.Load(); old != nil {
		return old.files
	}
	return 0
}

// filesFit refuses an index that needs n descriptors, more than
// MaxOpenFiles: it could never fit (400).
func (r *Registry) filesFit(n int64) error {
	if limit := r.limits.MaxOpenFiles; n > limit {
		return errBadRequest("max_open_files_exceeded", fmt.Sprintf(
			"the index needs %d open files, more than the server allows all its indexes (max_open_files %d)", n, limit))
	}
	return nil
}

// admitFiles counts the descriptors an open needs, n, of which counted
// are counted already, beside those of the handle it replaces (beside):
// the count may pass MaxOpenFiles by beside until that handle closes. A
// load that could never fit is a 400, one that does not fit now a 429.
func (r *Registry) admitFiles(n, counted, beside int64) error {
	if err := r.filesFit(n); err != nil {
		return err
	}
	limit := r.limits.MaxOpenFiles
	more := n - counted
	if more <= 0 {
		return nil
	}
	if held := r.files.Add(more); held-beside > limit {
		r.files.Add(-more)
		return errTooMany("max_open_files_exceeded", fmt.Sprintf(
			"too many open files: the index needs %d, and the loaded indexes hold %d of the %d the server allows (max_open_files); DELETE one, or raise max_open_files and the process's descriptor limit (ulimit -n)",
			n, held-n, limit))
	}
	return nil
}
