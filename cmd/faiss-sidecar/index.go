package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
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
	indexEf                          indexEfFlag
	verifyChecksum                   bool
}

func (f *indexFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "mode", "memory_efficient", "loading mode: full (whole file in memory) or memory_efficient (read on demand)")
	fs.StringVar(&f.backend, "backend", "", backendHelp+"; memory_efficient defaults to mmap")
	fs.StringVar(&f.semantics, "semantics", "faiss-modern", "search semantics: faiss-modern or faiss-1.7.3")
	fs.StringVar(&f.kernel, "kernel", "fast", "distance kernel: fast or exact")
	fs.Int64Var(&f.cacheBytes, "cache-bytes", 0, "block cache budget for pread/direct/zstd (0: 64 MiB)")
	fs.IntVar(&f.cacheBlock, "cache-block", 0, "block cache block size in bytes, a power of two (0: 4096); pread/direct")
	fs.IntVar(&f.exactFilterMax, "exact-filter-max", 0, "faiss-modern: answer filters allowing at most max(k, this) ids by an exact scan (0: 2000, measured crossover; -1: k only, as OpenSearch)")
	fs.Int64Var(&f.memoryBudget, "memory-budget", 0, "memory_efficient: bytes the index may hold; leaves the Go heap its share, pins the neighbor lists (all when they fit, else the hubs'), gives the rest to a vector cache and reads misses in batches (default backend direct)")
	fs.BoolVar(&f.warmup, "warmup", false, "after open, pull the graph (then vectors, up to the cache budget) in with large sequential reads")
	fs.BoolVar(&f.batchReads, "batch-reads", false, "pread/direct: read an expanded node's unvisited neighbors' vectors as one parallel batch")
	fs.Var(&f.indexEf, "index-ef-search", "search as if the index had been written with efSearch N (FAISS's index.hnsw.efSearch, OpenSearch's index-level ef_search; 1.7.3 also sizes the candidate pool by it); --ef-search still sets the per-query value (default: the stored efSearch)")
	fs.BoolVar(&f.verifyChecksum, "verify-checksum", false, "check an OpenSearch file's Lucene footer CRC-32 at load (one pass over the file; mode full always does, and checks every neighbor id)")
}

// indexEfFlag is --index-ef-search: 0 when not given, else a value
// hnswsearch.CheckIndexEfSearch accepts (checked as the flag is parsed).
type indexEfFlag int

func (e *indexEfFlag) String() string { return strconv.Itoa(int(*e)) }

func (e *indexEfFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	if err := hnswsearch.CheckIndexEfSearch(n); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), hnswsearch.ErrBadOption.Error()+": "))
	}
	*e = indexEfFlag(n)
	return nil
}

// loadedIndex is an opened storage + parsed file + search index.
type loadedIndex struct {
	st      partial.Storage
	file    *faissfmt.File
	idx     *hnswsearch.Index
	backend string
	openDur time.Duration
	// heapBytes is the Go heap share of a --memory-budget plan (0 without);
	// prevLimit the runtime's memory limit before limitHeap changed it.
	heapBytes, prevLimit int64
}

// limitHeap sets the Go runtime's memory limit, under --memory-budget, to
// the plan's heap share plus what the command itself holds live (its
// queries, ground truth): with less, the collector runs without pause.
// GOMEMLIMIT, when set, wins.
func (l *loadedIndex) limitHeap() {
	if l.heapBytes == 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.FreeOSMemory() // collect, and return what opening left behind
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	l.prevLimit = debug.SetMemoryLimit(int64(live[0].Value.Uint64()) + l.heapBytes)
}

func (l *loadedIndex) Close() {
	l.idx.Close()
	l.st.Close()
	if l.prevLimit != 0 {
		debug.SetMemoryLimit(l.prevLimit)
	}
}

func (f *indexFlags) open(path string) (*loadedIndex, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
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
	opts := hnswsearch.Options{Semantics: sem, Kernel: ker, BatchReads: f.batchReads, ExactFilterMax: f.exactFilterMax,
		IndexEfSearch: int(f.indexEf), FullMode: f.mode == "full", VerifyChecksum: f.verifyChecksum}
	cacheBytes := f.cacheBytes
	var heapBytes int64
	if f.memoryBudget > 0 {
		if f.backend == "" && backend != "zstd" {
			backend = "direct"
		}
		if cacheBytes, heapBytes, err = budgetPolicy(path, backend, f.memoryBudget, &opts); err != nil {
			return nil, err
		}
	}
	var align int64
	if backend == "memory" || (backend == "pread" && mirrored(path, cacheBytes)) {
		pf, err := hnswsearch.Probe(path, backend)
		if err != nil {
			return nil, err
		}
		align = hnswsearch.AlignOffset(pf)
	}
	st, err := openSourceBlocks(path, backend, cacheBytes, f.cacheBlock, align)
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
	return &loadedIndex{st: st, file: file, idx: idx, backend: backendName(st), openDur: time.Since(start), heapBytes: heapBytes}, nil
}

// budgetPolicy plans a memory budget (hnswsearch.PlanBudget) into o and
// returns the block cache budget and the plan's Go heap share (everything
// else the plan holds lives outside the Go heap).
func budgetPolicy(path, backend string, budget int64, o *hnswsearch.Options) (cacheBytes, heapBytes int64, err error) {
	pf, err := hnswsearch.Probe(path, backend)
	if err != nil {
		return 0, 0, err
	}
	p, err := hnswsearch.PlanBudget(pf, backend, budget, runtime.GOMAXPROCS(0))
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	p.Apply(o)
	return p.BlockCacheBytes, p.HeapBytes, nil
}

// openWithQueries opens the index and reads the queries checked against it.
// At most limit queries are read (0: all).
func (f *indexFlags) openWithQueries(path, queries string, limit int) (*loadedIndex, []hnswsearch.Query, error) {
	l, err := f.open(path)
	if err != nil {
		return nil, nil, err
	}
	qs, err := loadQueries(queries, l.idx, limit)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	l.limitHeap()
	return l, qs, nil
}

// loadQueries reads a query file (its first limit rows; 0: all) and checks
// it against the index.
func loadQueries(path string, x *hnswsearch.Index, limit int) ([]hnswsearch.Query, error) {
	m, err := vecio.ReadFileRows(path, limit)
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

// mirrored reports whether a pread cache of cacheBytes (0: the default)
// will mirror the file at path: only then does the vectors' alignment, and
// the probe that finds it, matter.
func mirrored(path string, cacheBytes int64) bool {
	fi, err := os.Stat(path)
	return err == nil && partial.Mirrors(partial.Options{CacheBytes: cacheBytes}.CacheBudget("pread"), fi.Size())
}
