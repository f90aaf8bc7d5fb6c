package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// LoadSpec says how to open an index (the body of PUT /indexes/{name}).
type LoadSpec struct {
	Path string `json:"path"`
	Mode string `json:"mode"` // full | memory_efficient | on_disk
	// Compression is on_disk's guide level: auto (default) or one of quant.Levels.
	Compression string `json:"compression,omitempty"`
	Backend     string `json:"backend"` // memory_efficient: mmap (default), pread, direct, zstd
	SpaceType   string `json:"space_type"`
	CacheBytes  int64  `json:"cache_bytes"`
	// MemoryBudget (memory_efficient only) applies the bounded-memory
	// policy (hnswsearch.PlanBudget): all the index may hold, counted
	// whole against the node's budget. Backend defaults to direct.
	MemoryBudget int64       `json:"memory_budget"`
	Semantics    string      `json:"semantics"`
	Kernel       string      `json:"kernel"`
	Rerank       *RerankSpec `json:"rerank,omitempty"`
	// EfSearch > 0 serves the index as if its file had been written with
	// this efSearch (FAISS's index.hnsw.efSearch, OpenSearch's index-level
	// ef_search); method_parameters.ef_search still overrides it per query.
	EfSearch int `json:"ef_search,omitempty"`
	// VerifyChecksum checks an OpenSearch file's Lucene footer CRC when the
	// index opens (mode full always does, and checks every neighbor id).
	VerifyChecksum bool `json:"verify_checksum,omitempty"`
	// CAGRASeed seeds a CAGRA graph's random level-0 entry points
	// (base_level_only graphs; 0: the fixed default).
	CAGRASeed uint64 `json:"cagra_seed,omitempty"`
	// VectorsPath is the vector file (.fvecs, .vec, float32 .npy or a
	// FAISS flat file, inside the data roots) of a graph written without
	// its vectors (FAISS's IO_FLAG_SKIP_STORAGE), which needs one.
	VectorsPath string `json:"vectors_path,omitempty"`
}

// engineSpec translates s for the engine, but for paths: Label is s.Path
// and Path is left for the caller to resolve; the rerank spec is not set.
func (s LoadSpec) engineSpec() engine.Spec {
	return engine.Spec{Label: s.Path, Mode: s.Mode, Compression: s.Compression, Backend: s.Backend, CacheBytes: s.CacheBytes,
		MemoryBudget: s.MemoryBudget, Semantics: s.Semantics, Kernel: s.Kernel, EfSearch: s.EfSearch,
		VerifyChecksum: s.VerifyChecksum, SpaceType: s.SpaceType, VectorsLabel: s.VectorsPath, CAGRASeed: s.CAGRASeed}
}

// setEngineSpec takes back the fields an engine.Change may change.
func (s *LoadSpec) setEngineSpec(es engine.Spec) {
	s.Mode, s.Compression, s.Backend, s.CacheBytes, s.MemoryBudget = es.Mode, es.Compression, es.Backend, es.CacheBytes, es.MemoryBudget
	s.EfSearch, s.Semantics, s.Kernel = es.EfSearch, es.Semantics, es.Kernel
}

// RerankSpec configures full-precision rescoring.
type RerankSpec struct {
	VectorsPath      string  `json:"vectors_path"`
	Strategy         string  `json:"strategy"`
	OversampleFactor float64 `json:"oversample_factor"`
}

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
	// reserved is what the registry admitted for this handle's open.
	reserved int64
	// planned is the budget of each of caches() at open: what a cache
	// shrunk to make room for another index grows back to (regrow).
	planned []int64
	// failed holds why the handle stopped answering (its file changed under
	// it); set once, it stays until the handle is replaced.
	failed atomic.Pointer[error]
	// names are the server's paths of its files and directories and what
	// errors call them (relabel).
	names []serverName
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
func (h *handle) failure(err error) error { return relabel(h.failureUnnamed(err), h.names) }

func (h *handle) failureUnnamed(err error) error {
	if errors.Is(err, engine.ErrCorrupt) {
		return &apiError{422, "corrupt_index", fmt.Sprintf(
			"index file %s is corrupt: %v; mode full checks every neighbor list when it loads", h.spec.Path, err)}
	}
	if !isFileChanged(err) {
		return err
	}
	return &apiError{503, "index_file_changed", fmt.Sprintf(
		"a file this index serves (%s) changed after it was loaded: %v; reload it with PUT /indexes/{name}/_mode or DELETE it", h.spec.Path, err)}
}

// checkFile compares h's files (index and rerank vectors) with what was
// opened: size, times, inode, and the path (a file replaced by rename).
func (h *handle) checkFile() error { return h.x.CheckFile() }

// checkFileContext is checkFile giving up a request to an object store
// when ctx ends.
func (h *handle) checkFileContext(ctx context.Context) error { return h.x.CheckFileContext(ctx) }

// errFileChanged is what storage reports when a served file changed.
var errFileChanged = engine.ErrFileChanged

// changeDetail is the numbers behind a file change (device:inode, times):
// the server's log keeps them, the client's answer says it in words.
func changeDetail(err error) string { return engine.ChangeDetail(err) }

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
	h.closeOnce.Do(h.x.Close)
}

// cache returns the handle's block cache, if its backend has one.
func (h *handle) caches() []engine.Resizable { return h.x.Caches() }

// score is OpenSearch's translation of a distance to a score.
func score(space string, d float32) float64 { return engine.Score(space, d) }

// apiError is an error with an HTTP status and a type for the envelope.
type apiError struct {
	Status int
	Type   string
	Reason string
}

func (e *apiError) Error() string { return e.Reason }

func badRequest(format string, a ...any) error {
	return &apiError{400, "bad_request", fmt.Sprintf(format, a...)}
}

func notFound(name string) error {
	return &apiError{404, "index_not_found", fmt.Sprintf("no index named %q", name)}
}

// errStatus maps an error to an HTTP status and type, in one place.
func errStatus(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Type
	case errors.Is(err, engine.ErrNotServable):
		return 422, "index_not_servable"
	case errors.Is(err, engine.ErrBadRequest), errors.Is(err, engine.ErrBudget):
		return 400, "bad_request"
	case errors.Is(err, engine.ErrBadQuery):
		return 400, "bad_query"
	case errors.Is(err, engine.ErrBadStorageOption), errors.Is(err, engine.ErrBadOption):
		return 400, "bad_request"
	case errors.Is(err, engine.ErrFormat), errors.Is(err, engine.ErrVectors):
		return 422, "bad_index_file"
	case errors.Is(err, engine.ErrDeadline):
		return 504, "search_timeout"
	case errors.Is(err, context.Canceled): // a read given up: the client went away
		return 499, "client_closed_request"
	case errors.Is(err, errFileChanged):
		return 503, "index_file_changed"
	case errors.Is(err, engine.ErrCorrupt): // found by a query where the load did not look
		return 422, "corrupt_index"
	case errors.Is(err, engine.ErrObjectStore): // the object store did not answer, or refused
		return 502, "object_storage_error"
	case errors.Is(err, fs.ErrNotExist), strings.Contains(err.Error(), "no such file"):
		return 404, "file_not_found"
	}
	return 500, "internal_error"
}
