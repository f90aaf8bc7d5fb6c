package engine

import (
	"context"
	"sync"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/recordcache"
	"github.com/faiss-sidecar/faiss-sidecar/quant"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// Index is one opened index: storage, parsed file, search index and, when
// asked, rerank vectors. It is safe for concurrent queries; Close ends it.
type Index struct {
	spec       Spec
	backend    Backend
	st         partial.Storage
	vst        partial.Storage // a separate vector file (Spec.VectorsPath), or nil
	file       *faissfmt.File
	idx        *hnswsearch.Index
	rer        *rerank.Store
	rerShared  bool // rer reads through st (remoteRerank)
	space      string
	cacheBytes int64        // the planned cache budget (zstd's frames, a block cache)
	guide      *quant.Codes // mode on_disk's guide
	guideInfo  GuideInfo
	closeOnce  sync.Once
}

// Close releases the search index, the rerank vectors and the storage.
func (x *Index) Close() {
	x.closeOnce.Do(func() {
		if x.idx != nil {
			x.idx.Close()
		}
		if x.guide != nil {
			x.guide.Close()
		}
		if x.rer != nil {
			x.rer.Close()
		}
		if x.vst != nil {
			x.vst.Close()
		}
		x.st.Close()
	})
}

// Spec is the spec the index was opened with, defaults filled in.
func (x *Index) Spec() Spec { return x.spec }

// Backend names the storage backend serving the index.
func (x *Index) Backend() Backend { return x.backend }

// Dim is the query length: components, or bytes for a binary index.
func (x *Index) Dim() int                       { return x.idx.Dim() }
func (x *Index) NTotal() int64                  { return x.idx.NTotal() }
func (x *Index) Binary() bool                   { return x.idx.Binary() }
func (x *Index) Metric() faissfmt.Metric        { return x.idx.Metric() }
func (x *Index) EfSearch() int                  { return x.idx.EfSearch() }
func (x *Index) StoredEfSearch() int            { return x.idx.StoredEfSearch() }
func (x *Index) Options() hnswsearch.Options    { return x.idx.Options() }
func (x *Index) PinnedBytes() int64             { return x.idx.PinnedBytes() }
func (x *Index) AllListsPinned() bool           { return x.idx.AllListsPinned() }
func (x *Index) VectorCache() recordcache.Stats { return x.idx.VectorCache() }

// MetricName is the metric as the front ends show it: L2, IP or Hamming.
func (x *Index) MetricName() string {
	if x.idx.Binary() {
		return "Hamming"
	}
	return x.idx.Metric().String()
}

// Space is the space type scores are given in.
func (x *Index) Space() string { return x.space }

// HeldBytes is the parsed small arrays plus what the search index holds
// outside the Go heap (pinned lists, vector cache, on_disk's guide); storage's own memory
// is in StorageStats.
func (x *Index) HeldBytes() int64 {
	n := x.file.ResidentBytes() + x.idx.HeldBytes()
	if x.guide != nil {
		n += x.guide.Bytes()
	}
	return n
}

// StorageStats is the backend's account of its reads and memory.
func (x *Index) StorageStats() (partial.Stats, bool) {
	if sr, ok := x.st.(partial.StatsReporter); ok {
		return sr.Stats(), true
	}
	return partial.Stats{}, false
}

// Cache is the storage's block cache, nil for backends without one.
func (x *Index) Cache() *blockcache.Cache {
	if c, ok := x.st.(*blockcache.Cached); ok {
		return c.Cache()
	}
	return nil
}

// Resizable is a cache a server may shrink to make room for another load.
type Resizable interface {
	Budget() int64
	SetBudget(int64)
}

// Caches are the index's caches that shrink (Resizable): the storage's
// block cache and the vector cache (the budget policy's, on_disk's rerank
// cache), those it has.
func (x *Index) Caches() []Resizable {
	var cs []Resizable
	if c := x.Cache(); c != nil {
		cs = append(cs, c)
	}
	if vc := x.idx.VectorRecords(); vc != nil {
		cs = append(cs, vc)
	}
	return cs
}

// SpareBytes is what of its planned memory budget (Plan.NeedBytes) the
// open index does not hold: an on_disk index whose rerank reads no vector
// through a cache (an exact guide) keeps none, and the bytes the lists
// leave are free for the caller to give back.
func (x *Index) SpareBytes() int64 { return x.idx.SpareBytes() }

// HasRerank reports whether the index rescores with full-precision vectors.
func (x *Index) HasRerank() bool { return x.rer != nil }

// RerankStrategy names the rerank read strategy ("" without rerank).
func (x *Index) RerankStrategy() string {
	if x.rer == nil {
		return ""
	}
	return x.rer.Strategy()
}

// RerankDim is the rerank vectors' dimension (0 without rerank).
func (x *Index) RerankDim() int {
	if x.rer == nil {
		return 0
	}
	return x.rer.Dim
}

// Warm pulls the graph, then the vectors up to the storage's cache budget
// (the block cache's current one; none on memory, mmap and uncached
// direct), into the cache or the page cache with large sequential reads.
func (x *Index) Warm() error { return x.WarmContext(nil) }

// WarmContext is Warm whose reads give up when ctx ends (nil: never), with
// an error wrapping context.Cause(ctx).
func (x *Index) WarmContext(ctx context.Context) error {
	limit := x.cacheBytes
	switch {
	case x.Cache() != nil:
		limit = x.Cache().Budget()
	case x.backend != BackendZstd:
		limit = 0
	}
	return x.idx.Warm(loadContext(ctx), limit)
}

// CheckFile compares the index's files (index, vector file and rerank vectors) with
// what was opened: size, times, inode and path. It fails with
// partial.ErrFileChanged.
func (x *Index) CheckFile() error { return x.CheckFileContext(nil) }

// CheckFileContext is CheckFile whose requests to an object store give up
// when ctx ends (nil: never): a server closing does not wait for a HEAD
// to a stalled store.
func (x *Index) CheckFileContext(ctx context.Context) error {
	ctx = loadContext(ctx)
	if fc, ok := x.st.(partial.FileChecker); ok {
		if err := fc.CheckFile(ctx); err != nil {
			return err
		}
	}
	if fc, ok := x.vst.(partial.FileChecker); ok {
		if err := fc.CheckFile(ctx); err != nil {
			return err
		}
	}
	if x.rer != nil && !x.rerShared { // else st's check was it
		return x.rer.CheckFile(ctx)
	}
	return nil
}
