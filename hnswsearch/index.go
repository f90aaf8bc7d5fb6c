package hnswsearch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/internal/offheap"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/recordcache"
)

// Semantics selects which FAISS behaviour the search reproduces.
type Semantics uint8

const (
	// Modern is FAISS 1.8 … 1.14.2 as bundled by OpenSearch k-NN
	// (docs/hnsw-search.md §9). The default.
	Modern Semantics = iota
	// FAISS173 is Debian's FAISS 1.7.3 exactly (docs/hnsw-search.md §1–§8),
	// quirks included.
	FAISS173
)

func (s Semantics) String() string { return [...]string{"faiss-modern", "faiss-1.7.3"}[s] }

// ParseSemantics accepts "faiss-modern" and "faiss-1.7.3".
func ParseSemantics(s string) (Semantics, error) {
	switch s {
	case "", "faiss-modern":
		return Modern, nil
	case "faiss-1.7.3":
		return FAISS173, nil
	}
	return 0, fmt.Errorf("unknown semantics %q (known: faiss-modern, faiss-1.7.3)", s)
}

// Kernel selects the distance kernel.
type Kernel uint8

const (
	// Fast reassociates sums (SIMD); the default.
	Fast Kernel = iota
	// Exact is sequential float32, bit-identical to Debian's FAISS build.
	Exact
)

func (k Kernel) String() string { return [...]string{"fast", "exact"}[k] }

// ParseKernel accepts "fast" and "exact".
func ParseKernel(s string) (Kernel, error) {
	switch s {
	case "", "fast":
		return Fast, nil
	case "exact":
		return Exact, nil
	}
	return 0, fmt.Errorf("unknown kernel %q (known: fast, exact)", s)
}

// Options configures an Index.
type Options struct {
	Semantics Semantics
	Kernel    Kernel
	// ExactFilterMax: with Modern semantics, a filter allowing at most
	// max(k, ExactFilterMax) ids is answered by an exact scan of those ids,
	// as OpenSearch does for at most k. 0 means DefaultExactFilterMax; a
	// negative value means k only (OpenSearch's default).
	ExactFilterMax int
	// BatchReads: on backends without zero-copy views that serve batched
	// reads, fetch the vectors of an expanded node's unvisited neighbors as
	// one parallel batch before computing their distances (same results).
	BatchReads bool
	// HeldBytes, on backends without zero-copy views, is memory outside the
	// Go heap for neighbor lists, vectors and a vector cache, spent at New
	// by the bounded-memory policy (Index.planHeld, budget.go).
	HeldBytes int64
	// IndexEfSearch > 0 searches as if the file had been written with
	// efSearch = IndexEfSearch: FAISS's index.hnsw.efSearch attribute
	// (OpenSearch's index-level ef_search). It replaces the stored value
	// wherever the search uses it (the stop rule without Params.EfSearch,
	// FAISS 1.7.3's pool capacity, the upper_beam variant); Params.EfSearch
	// still overrides it per query as SearchParametersHNSW does. 0 keeps
	// the stored value; others must pass CheckIndexEfSearch.
	IndexEfSearch int
	// FullMode says the front end read the whole file into memory (loading
	// mode full). Every byte is read anyway, so New also checks every
	// neighbor list (ids in range, on the level they are listed at, −1
	// only as trailing padding; FAISS ≥ 1.14 checks the same on read) and
	// the Lucene footer's CRC-32, failing with a faissfmt.ErrFormat error.
	FullMode bool
	// VerifyChecksum checks the Lucene footer's CRC-32 of an OpenSearch
	// file at New (one pass over the file; implied by FullMode). A file
	// without a footer has no checksum to check.
	VerifyChecksum bool
	// Guide, when set, is a compressed in-memory copy of the vectors the
	// search computes every distance on (loading mode on_disk): no vector
	// is read, distances are estimates, and the caller reranks. Float
	// indexes with flat storage only; HeldBytes then pins lists, and what
	// they leave is a vector cache for the caller's rerank (VectorRecords).
	Guide Guide
	// NoVectorCache, with a Guide, says the caller's rerank reads no vector
	// through the cache (an exact guide decodes them; another file serves
	// them): HeldBytes then goes to lists only, and what they leave unused
	// (SpareBytes).
	NoVectorCache bool
	// Vectors serves the vectors of a graph written without them
	// (faissfmt's null storage): a separate vector file. nil otherwise.
	Vectors *Vectors
	// CAGRASeed seeds the random level-0 entry points of a CAGRA graph
	// stored with base_level_only (cagra.go). Each query draws from a
	// generator seeded by CAGRASeed and the query's own bytes, so a query
	// gets the same entry points, and results, whatever ran before it or
	// beside it; the default 0 is as good a seed as any.
	CAGRASeed uint64
	// NoAVX512 keeps the fast kernels on AVX2 where the CPU has AVX-512
	// (distance.Fast; same bits, for machines where AVX-512 slows the
	// clock): the caller's choice, bound at New.
	NoAVX512 bool

	// hold is what New keeps in memory: the policy's outcome, or set by
	// tests directly (with HeldBytes 0).
	hold holding
	test testHooks
}

// holding is what an Index pins outside the Go heap (pinned.go).
type holding struct {
	allLists bool  // every node's lists, compacted
	hubBytes int64 // else the lists of the likeliest-expanded nodes within this many bytes
	vectors  bool  // the vectors section
	// cacheBytes is a vector cache's size; restBytes > 0 instead sizes it
	// after pinning, as restBytes less the pinned lists.
	cacheBytes, restBytes int64
	// spare: what the lists leave of restBytes is SpareBytes, not a cache.
	spare bool
}

// testHooks are knobs only tests and benchmarks turn.
type testHooks struct {
	headsFirst int8 // > 0: two prefetch passes whatever the vector size; < 0: one
}

// DefaultExactFilterMax is where an exact scan of the allowed ids stops
// being faster than the filtered graph search (BenchmarkFilterThreshold
// finds the crossover; below it the graph search also loses recall). Both
// costs scale with the distance cost, so the crossover in ids barely moves
// with the dimension.
const DefaultExactFilterMax = 2000

// MaxK is the largest k a query may ask for; MaxEfSearch the largest ef.
const (
	MaxK        = 10000
	MaxEfSearch = 1 << 20
)

// Errors callers can test with errors.Is.
var (
	ErrBadQuery  = errors.New("bad query")
	ErrCorrupt   = errors.New("corrupt index")
	ErrBadOption = errors.New("bad option")
	ErrDeadline  = errors.New("search stopped at its deadline")
)

const fltMax = math.MaxFloat32

// Index searches one opened FAISS HNSW file whose graph and vectors are read
// through a partial.Storage. It is immutable and safe for concurrent use;
// per-query state comes from a pool.
type Index struct {
	st     partial.Storage
	viewer partial.Viewer // nil: bytes are copied with ReadAtContext
	// The vectors' storage: st, or a separate vector file (external,
	// Options.Vectors) with its own viewer and I/O tally. Vector v lies at
	// codes.Offset + v·vstride.
	vst      partial.Storage
	vviewer  partial.Viewer
	vstride  int64
	external bool
	batch    partial.BatchReader // set when Options.BatchReads applies
	// listBatch reads level-0 lists with the pool's next ones (listahead.go);
	// nil where that does not apply.
	listBatch partial.BatchReader
	blocks    partial.BlockViewer // cached blocks served without copying
	opts      Options
	h         *faissfmt.HNSW
	efSearch  int32 // the efSearch searches use: Options.IndexEfSearch or the stored one
	n         int32
	d         int // float dimension, or bits for binary
	codeSize  int
	binary    bool
	metric    faissfmt.Metric
	kind      distKind
	sq        distance.SQ
	nb        faissfmt.Section
	codes     faissfmt.Section // the vectors' bytes in vst (strided by vstride)
	idMap     *faissfmt.Section
	// Where the search gets lists and vectors, chosen at New.
	lists listSource
	vecs  vectorSource
	// baseLevel > 0: a CAGRA graph searched on level 0 only from the best
	// of baseLevel random nodes (cagra.go).
	baseLevel int
	// Zero-copy views of the sections (viewer backends), or pinned copies.
	nbView, codesView, idView []byte
	pinned                    *pinnedLists       // lists pinned in memory, or nil
	codesMem                  offheap.Buf        // backs codesView when vectors are pinned
	codesStride               int64              // bytes between vectors in codesView
	idMem                     offheap.Buf        // backs idView when the id map is pinned
	vc                        *recordcache.Cache // vectors cache, or nil
	spare                     int64              // SpareBytes
	scratch                   sync.Pool
	reverse                   atomic.Pointer[reverseMap]
	reverseMu                 sync.Mutex
	closed                    atomic.Bool
}

type distKind uint8

const (
	flatL2 distKind = iota
	flatIP
	sqL2
	sqIP
	sqIntL2 // QT_8bit_direct, d % 16 == 0: integer domain
	sqIntIP
	hamming
)

// CheckSearchable is New's first check, for a caller that parsed f and
// would rather refuse it before reading more (a whole download, a guide
// build): f must hold an HNSW graph of at most 2^31−1 nodes.
func CheckSearchable(f *faissfmt.File) error {
	g := f.Graph
	if g == nil || g.HNSW == nil {
		return fmt.Errorf("%s index has no HNSW graph; searchable are IHNf, IHNs, IBHf, IHc2, IHNc and IBHc, alone or in an id map", f.Root.FourCC)
	}
	if g.NTotal > math.MaxInt32 {
		return fmt.Errorf("%d vectors exceed FAISS's 32-bit node ids", g.NTotal)
	}
	return nil
}

// New prepares a search over f, whose bytes s serves. s must stay open until
// the Index is closed. HNSW indexes (IHNf, IHNs, IBHf and the CAGRA-built
// IHc2, IHNc, IBHc, possibly inside an id map) with metric L2 or IP are
// searchable; a graph written without its vectors needs Options.Vectors.
// The reads New makes (checks, pinning) give up when ctx ends.
func New(ctx context.Context, f *faissfmt.File, s partial.Storage, o Options) (*Index, error) {
	if err := CheckSearchable(f); err != nil {
		return nil, err
	}
	g := f.Graph
	x := &Index{st: s, opts: o, h: g.HNSW, n: int32(g.NTotal), d: g.D, binary: g.Binary, metric: g.Metric}
	x.efSearch = g.HNSW.EfSearch
	if o.IndexEfSearch != 0 {
		if err := CheckIndexEfSearch(o.IndexEfSearch); err != nil {
			return nil, err
		}
		x.efSearch = int32(o.IndexEfSearch)
	}
	if c := g.CAGRA; c != nil && c.BaseLevelOnly {
		x.baseLevel = max(1, int(c.NumBaseLevelSearchEntrypoints))
	}
	if err := x.vectorsOf(f, s, o.Vectors); err != nil {
		return nil, err
	}
	st := f.Storage // nil with a separate vector file
	x.nb = g.HNSW.Neighbors
	if f.IDMap != nil {
		s, _ := f.IDMap.Section("id_map")
		x.idMap = &s
	}
	switch {
	case g.Binary:
		x.kind = hamming
	case g.Metric != faissfmt.MetricL2 && g.Metric != faissfmt.MetricInnerProduct:
		return nil, fmt.Errorf("metric %s is not supported by HNSW search (L2 and IP are)", g.Metric)
	case st != nil && st.SQ != nil:
		x.sq = distance.SQ{QType: int(st.SQ.QType), D: g.D, Trained: st.SQ.Trained}
		switch {
		case x.sq.IntegerDirect() && g.Metric == faissfmt.MetricL2:
			x.kind = sqIntL2
		case x.sq.IntegerDirect():
			x.kind = sqIntIP
		case g.Metric == faissfmt.MetricL2:
			x.kind = sqL2
		default:
			x.kind = sqIP
		}
	case g.Metric == faissfmt.MetricL2:
		x.kind = flatL2
	default:
		x.kind = flatIP
	}
	if st != nil && st.SQ != nil && len(st.SQ.Trained) != int(st.SQ.QType.TrainedLen(int64(g.D))) {
		return nil, fmt.Errorf("scalar quantizer is not trained")
	}
	if err := x.acquireViews(); err != nil {
		return nil, err
	}
	if err := x.verify(ctx, f); err != nil {
		x.releaseViews()
		return nil, err
	}
	if o.Guide != nil {
		if err := x.checkGuide(o.Guide); err != nil {
			x.releaseViews()
			return nil, err
		}
	}
	if x.viewer == nil && x.n > 0 {
		if err := x.hold(ctx, &o); err != nil {
			x.release()
			x.releaseViews()
			return nil, err
		}
	}
	x.opts = o
	if x.viewer == nil {
		x.blocks, _ = s.(partial.BlockViewer)
	}
	if b, ok := x.vst.(partial.BatchReader); ok && o.BatchReads && x.vviewer == nil && x.codesView == nil {
		x.batch = b
	}
	x.lists, x.vecs = x.chooseLists(), x.chooseVectors()
	x.listBatch = x.chooseListBatch()
	x.scratch.New = func() any { return x.newScratch() }
	return x, nil
}

// acquireViews takes zero-copy views of the sections on Viewer backends:
// the neighbor lists and the id map in the index file's storage, the
// vectors in theirs (the same one unless they are a separate file).
func (x *Index) acquireViews() error {
	if v, ok := x.st.(partial.Viewer); ok {
		if err := v.Acquire(); err != nil {
			return err
		}
		var err error
		if x.nbView, err = v.View(x.nb.Offset, x.nb.Len); err == nil && x.idMap != nil {
			x.idView, err = v.View(x.idMap.Offset, x.idMap.Len)
		}
		if err != nil {
			v.Release()
			x.nbView, x.idView = nil, nil
			return err
		}
		x.viewer = v
	}
	if !x.external {
		x.vviewer = x.viewer
	} else if v, ok := x.vst.(partial.Viewer); ok {
		if err := v.Acquire(); err != nil {
			x.releaseViews()
			return err
		}
		x.vviewer = v
	}
	if x.vviewer != nil {
		b, err := x.vviewer.View(x.codes.Offset, x.codes.Len)
		if err != nil {
			x.releaseViews()
			return err
		}
		x.codesView, x.codesStride = b, x.vstride
	}
	return nil
}

// releaseViews releases what acquireViews took.
func (x *Index) releaseViews() {
	if x.viewer != nil {
		x.viewer.Release()
	}
	if x.external && x.vviewer != nil {
		x.vviewer.Release()
	}
}

// Close releases the Index's hold on the storage (zero-copy views); it does
// not close the storage. Searches must have returned.
func (x *Index) Close() error {
	if x.closed.Swap(true) {
		return nil
	}
	x.releaseViews()
	x.release()
	return nil
}

// Dim is the query length: float components, or bytes for binary indexes.
func (x *Index) Dim() int {
	if x.binary {
		return x.codeSize
	}
	return x.d
}

// Binary reports whether queries are binary codes (Hamming distance).
func (x *Index) Binary() bool { return x.binary }

// Metric is the index's metric.
func (x *Index) Metric() faissfmt.Metric { return x.metric }

// NTotal is the number of vectors.
func (x *Index) NTotal() int64 { return int64(x.n) }

// StoredEfSearch is the efSearch saved in the file.
func (x *Index) StoredEfSearch() int { return int(x.h.EfSearch) }

// CheckIndexEfSearch checks an index-level efSearch (Options.IndexEfSearch
// when set): 1 … MaxEfSearch. Its error matches ErrBadOption and says
// what is wrong alone, as a flag's or a field's message.
func CheckIndexEfSearch(n int) error {
	if n < 1 || n > MaxEfSearch {
		return &optionError{fmt.Sprintf("index ef_search %d is out of range [1, %d]", n, MaxEfSearch)}
	}
	return nil
}

// optionError is an option error worded for users alone: it matches
// ErrBadOption without carrying its text.
type optionError struct{ msg string }

func (e *optionError) Error() string        { return e.msg }
func (e *optionError) Is(target error) bool { return target == ErrBadOption }

// EfSearch is the efSearch searches use without Params.EfSearch:
// Options.IndexEfSearch when set, else the stored one.
func (x *Index) EfSearch() int { return int(x.efSearch) }

// verify runs the load-time checks the options ask for (Options.FullMode,
// Options.VerifyChecksum), on the zero-copy views where there are some.
func (x *Index) verify(ctx context.Context, f *faissfmt.File) (err error) {
	// The checksum reads a mapping of the whole file: a file truncated
	// meanwhile is an error, not a SIGBUS.
	defer partial.RecoverFault(x.st, debug.SetPanicOnFault(true), &err)
	if x.opts.FullMode && x.n > 0 {
		var err error
		if x.nbView != nil {
			err = x.h.CheckNeighborBytes(x.nbView)
		} else {
			err = x.h.CheckNeighbors(partial.ReaderAt(ctx, x.st))
		}
		if err != nil {
			return err
		}
	}
	if (x.opts.FullMode || x.opts.VerifyChecksum) && f.Footer != nil {
		if x.viewer != nil {
			b, err := x.viewer.View(0, f.Size-8)
			if err != nil {
				return err
			}
			return faissfmt.CheckFooterCRCBytes(b, f)
		}
		return faissfmt.CheckFooterCRC(partial.ReaderAt(ctx, x.st), f)
	}
	return nil
}

// Options returns the options the Index was made with.
func (x *Index) Options() Options { return x.opts }

// PinnedBytes is the memory the Index holds for pinned neighbor lists,
// vectors and id map.
func (x *Index) PinnedBytes() int64 {
	n := int64(len(x.codesMem.B)) + int64(len(x.idMem.B))
	if x.pinned != nil {
		n += x.pinned.bytes
	}
	return n
}

// AllListsPinned reports whether every neighbor list is pinned in memory.
func (x *Index) AllListsPinned() bool { return x.opts.hold.allLists }

// VectorCache describes the vector cache (zero without one).
func (x *Index) VectorCache() recordcache.Stats {
	if x.vc == nil {
		return recordcache.Stats{}
	}
	return x.vc.Stats()
}

// VectorRecords is the vector cache itself (nil without one): records of
// a vector's bytes by label. With Options.Guide the walk reads no vector,
// and the cache is the caller's to fill with the vectors it reranks.
func (x *Index) VectorRecords() *recordcache.Cache { return x.vc }

// HeldBytes is the memory the Index holds beyond the parsed file's small
// arrays: pinned neighbor lists and the vector cache.
func (x *Index) HeldBytes() int64 { return x.PinnedBytes() + x.VectorCache().Bytes }

// SpareBytes is what of Options.HeldBytes the Index left unused: with
// NoVectorCache, what the lists did not take; 0 otherwise.
func (x *Index) SpareBytes() int64 { return x.spare }

// AlignOffset is the file offset mode full and the pread block cache should
// place on a cache-line boundary in memory (the storage's AlignOffset):
// the vectors section's start, so
// each vector spans the fewest cache lines. 0 when f has no vectors section.
func AlignOffset(f *faissfmt.File) int64 {
	if f.Storage == nil {
		return 0
	}
	sec, _ := f.Storage.Section("codes")
	return sec.Offset
}
