package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// indexFlags are the flags every command that opens an index for search takes.
type indexFlags struct {
	mode, backend, semantics, kernel string
	cacheBytes                       int64
	cacheBlock                       int
	batchReads                       bool
	exactFilterMax                   int
	memoryBudget                     int64
	warmup                           bool
}

func (f *indexFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "mode", "memory_efficient", "loading mode: full (whole file in memory) or memory_efficient (read on demand)")
	fs.StringVar(&f.backend, "backend", "", backendHelp+"; memory_efficient defaults to mmap")
	fs.StringVar(&f.semantics, "semantics", "faiss-modern", "search semantics: faiss-modern or faiss-1.7.3")
	fs.StringVar(&f.kernel, "kernel", "fast", "distance kernel: fast or exact")
	fs.Int64Var(&f.cacheBytes, "cache-bytes", 0, "block cache budget for pread/direct/zstd (0: 64 MiB)")
	fs.IntVar(&f.cacheBlock, "cache-block", 0, "block cache block size in bytes, a power of two (0: 4096); pread/direct")
	fs.IntVar(&f.exactFilterMax, "exact-filter-max", 0, "faiss-modern: answer filters allowing at most max(k, this) ids by an exact scan (0: 2000, measured crossover; -1: k only, as OpenSearch)")
	fs.Int64Var(&f.memoryBudget, "memory-budget", 0, "memory_efficient: bytes the index may hold; pins the neighbor lists when they fit in half, gives the rest to the vector cache, reads misses in batches (default backend direct)")
	fs.BoolVar(&f.warmup, "warmup", false, "after open, pull the graph (then vectors, up to the cache budget) in with large sequential reads")
	fs.BoolVar(&f.batchReads, "batch-reads", false, "pread/direct: read an expanded node's unvisited neighbors' vectors as one parallel batch")
}

// loadedIndex is an opened storage + parsed file + search index.
type loadedIndex struct {
	st      partial.Storage
	file    *faissfmt.File
	idx     *hnswsearch.Index
	backend string
	openDur time.Duration
}

func (l *loadedIndex) Close() {
	l.idx.Close()
	l.st.Close()
}

func (f *indexFlags) open(path string) (*loadedIndex, error) {
	backend, err := partial.ModeBackend(f.mode, f.backend, path)
	if err != nil {
		return nil, usagef("%v", err)
	}
	sem, err := hnswsearch.ParseSemantics(f.semantics)
	if err != nil {
		return nil, usagef("%v", err)
	}
	ker, err := hnswsearch.ParseKernel(f.kernel)
	if err != nil {
		return nil, usagef("%v", err)
	}
	start := time.Now()
	opts := hnswsearch.Options{Semantics: sem, Kernel: ker, BatchReads: f.batchReads, ExactFilterMax: f.exactFilterMax}
	cacheBytes := f.cacheBytes
	if f.memoryBudget > 0 {
		if f.mode != "memory_efficient" {
			return nil, usagef("--memory-budget applies to --mode memory_efficient")
		}
		if f.backend == "" && backend != "zstd" {
			backend = "direct"
		}
		if cacheBytes, err = budgetPolicy(path, backend, f.memoryBudget, &opts); err != nil {
			return nil, err
		}
	}
	st, err := openSourceBlocks(path, backend, cacheBytes, f.cacheBlock)
	if err != nil {
		return nil, err
	}
	file, err := faissfmt.Open(st, st.Size())
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	idx, err := hnswsearch.New(file, st, opts)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.warmup {
		limit := cacheBytes
		if c, ok := st.(*partial.Cached); ok {
			limit = c.Cache().Budget()
		}
		if err := idx.Warm(limit); err != nil {
			st.Close()
			return nil, err
		}
	}
	return &loadedIndex{st: st, file: file, idx: idx, backend: backendName(st), openDur: time.Since(start)}, nil
}

// budgetPolicy splits a memory budget for memory_efficient serving. Half
// of it is left to the Go runtime: blocks churn through the cache, and with
// less headroom the collector runs continuously (fashion-mnist in a cgroup
// of a third of the file: cache+lists at 0.7 of the limit ran 5,580 GCs in
// 4 s and 11 QPS; at 0.5, 77 GCs and 36 QPS). From the other half: the
// small arrays, the neighbor lists pinned when they fit in half of what is
// left, the rest for the vector cache; misses are read in batches. The
// runtime's memory limit is set to the budget (unless GOMEMLIMIT is set).
func budgetPolicy(path, backend string, budget int64, o *hnswsearch.Options) (cacheBytes int64, err error) {
	pf, err := hnswsearch.Probe(path, backend)
	if err != nil {
		return 0, err
	}
	left := budget/2 - pf.ResidentBytes()
	if g := pf.Graph; g != nil && g.HNSW.Neighbors.Len <= left/2 {
		o.PinNeighbors = true
		left -= g.HNSW.Neighbors.Len
	}
	// Partial pinning (hnswsearch.Options.PinBytes) is not enabled here yet:
	// at 1/10 of fashion-mnist it has not beaten reading the lists on demand.
	o.BatchReads = true
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(budget)
	}
	return max(left, 1<<20), nil
}

// openWithQueries opens the index and reads the queries checked against it.
func (f *indexFlags) openWithQueries(path, queries string) (*loadedIndex, []hnswsearch.Query, error) {
	l, err := f.open(path)
	if err != nil {
		return nil, nil, err
	}
	qs, err := loadQueries(queries, l.idx)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, qs, nil
}

// loadQueries reads a query file and checks it against the index.
func loadQueries(path string, x *hnswsearch.Index) ([]hnswsearch.Query, error) {
	m, err := vecio.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if m.Dim != x.Dim() {
		unit := "components"
		if x.Binary() {
			unit = "bytes"
		}
		return nil, fmt.Errorf("%s: queries have %d values, the index expects %d %s", path, m.Dim, x.Dim(), unit)
	}
	qs := make([]hnswsearch.Query, m.N)
	for i := range qs {
		switch {
		case x.Binary() && m.U8 != nil:
			qs[i].Code = m.RowU8(i)
		case x.Binary():
			return nil, fmt.Errorf("%s: a binary index needs byte queries (.bvecs or uint8 .npy)", path)
		case m.F32 != nil:
			qs[i].Vector = m.RowF32(i)
		case m.U8 != nil: // e.g. SIFT .bvecs: byte components of float vectors
			v := make([]float32, m.Dim)
			for j, b := range m.RowU8(i) {
				v[j] = float32(b)
			}
			qs[i].Vector = v
		default:
			return nil, fmt.Errorf("%s: integer arrays are not queries", path)
		}
	}
	return qs, nil
}

// loadIDs reads allowed ids: one per line (.txt), .ivecs (all values) or an integer .npy.
func loadIDs(path string) ([]int64, error) {
	m, err := vecio.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if m.I64 == nil && m.N > 0 {
		return nil, fmt.Errorf("%s: ids must be integers (.txt, .ivecs or an integer .npy)", path)
	}
	if m.I64 == nil {
		return []int64{}, nil
	}
	return m.I64, nil
}

// queryFlags registers --queries, --k and --ef-search.
func queryFlags(fs *flag.FlagSet) (queries *string, k, ef *int) {
	return fs.String("queries", "", "query vectors: .fvecs, .bvecs or .npy"),
		fs.Int("k", 10, "neighbors per query"),
		fs.Int("ef-search", 0, "efSearch (0: the value stored in the index)")
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
