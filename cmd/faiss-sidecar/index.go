package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
)

// indexFlags are the flags every command that opens an index for search takes.
type indexFlags struct {
	mode                  engine.Mode
	backend               engine.Backend
	semantics, kernel     string
	compression, guideDir string
	cacheBytes            int64
	cacheBlock            int
	cacheDir              cacheDirFlags
	batchReads            bool
	exactFilterMax        int
	memoryBudget          budgetFlag
	warmup                bool
	indexEf               indexEfFlag
	verifyChecksum        bool
	cagraSeed             uint64
	vectors               string
	// workers is how many queries run at once, for the memory plan
	// (--threads); 0: GOMAXPROCS. machine and beside: Spec.MachineBudget
	// and Spec.Beside, for a command serving the index its queries
	// (prepareWithQueries).
	workers int
	machine bool
	beside  int64
}

func (f *indexFlags) register(fs *flag.FlagSet) {
	fs.StringVar((*string)(&f.mode), "mode", string(engine.ModeMemoryEfficient), "loading mode: full (whole file in memory), memory_efficient (read on demand) or on_disk (graph walked on a compressed in-memory guide, exact rerank from the file)")
	fs.StringVar(&f.compression, "compression", "", "on_disk: the guide's compression, "+strings.Join(engine.CompressionNames(), ", ")+"; 4x is 8 bits a dimension, 5x 6 bits, 6x 5 bits, 8x 4 bits, 16x 2 bits, 32x 1 bit (default auto: under --memory-budget the finest whose guide fits with every neighbor list pinned, else the finest whose guide fits; without one 4x, or, for bench and search, as --memory-budget says)")
	fs.StringVar(&f.guideDir, "guide-dir", "", "on_disk: directory of guide files (default: beside the index); a missing, stale or corrupt guide is built and written there")
	fs.StringVar((*string)(&f.backend), "backend", "", backendHelp+"; memory_efficient defaults to "+string(engine.DefaultMemoryEfficientBackend))
	fs.StringVar(&f.semantics, "semantics", "faiss-modern", "search semantics: faiss-modern or faiss-1.7.3")
	fs.StringVar(&f.kernel, "kernel", "fast", "distance kernel: fast or exact")
	fs.Int64Var(&f.cacheBytes, "cache-bytes", 0, "block cache budget for pread/direct/zstd (0: 64 MiB)")
	f.cacheDir.register(fs)
	fs.IntVar(&f.cacheBlock, "cache-block", 0, "block cache block size in bytes, a power of two (0: 4096); pread/direct")
	fs.IntVar(&f.exactFilterMax, "exact-filter-max", 0, "faiss-modern: answer filters allowing at most max(k, this) ids by an exact scan (0: 2000, measured crossover; -1: k only, as OpenSearch)")
	fs.Var(&f.memoryBudget, "memory-budget", "memory_efficient and on_disk: `bytes` the index may hold; leaves the Go heap its share, pins the neighbor lists (all when they fit, else the hubs'), gives the rest to a vector cache and reads misses in batches (backend direct unless --backend names one). Default: no budget, but for on_disk the machine's memory less a sixteenth (8 to 64 MiB) and what the command holds, when that cannot hold the index's files and their 4x guide; 0: no budget, on_disk too")
	fs.BoolVar(&f.warmup, "warmup", false, "after open, pull the graph (then vectors, up to the cache budget) in with large sequential reads")
	fs.BoolVar(&f.batchReads, "batch-reads", false, "pread/direct: read an expanded node's unvisited neighbors' vectors as one parallel batch")
	fs.Var(&f.indexEf, "index-ef-search", "search as if the index had been written with efSearch N (FAISS's index.hnsw.efSearch, OpenSearch's index-level ef_search; 1.7.3 also sizes the candidate pool by it); --ef-search still sets the per-query value (default: the stored efSearch)")
	fs.StringVar(&f.vectors, "vectors", "", vectorsHelp)
	fs.Uint64Var(&f.cagraSeed, "cagra-seed", 0, "seed of the random level-0 entry points FAISS draws for a CAGRA graph saved with base_level_only (0: a fixed default; answers repeat for a seed)")
	fs.BoolVar(&f.verifyChecksum, "verify-checksum", false, "check an OpenSearch file's Lucene footer CRC-32 at load (one pass over the file; mode full always does, and checks every neighbor id)")
}

// vectorsHelp is --vectors' help (search, bench, inspect).
const vectorsHelp = "the vectors of a graph written without them (FAISS's IO_FLAG_SKIP_STORAGE): an .fvecs, .vec, float32 .npy or FAISS flat file, in id order"

// indexEfFlag is --index-ef-search: 0 when not given, else a value
// engine.CheckIndexEfSearch accepts (checked as the flag is parsed).
type indexEfFlag int

func (e *indexEfFlag) String() string { return strconv.Itoa(int(*e)) }

func (e *indexEfFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	if err := engine.CheckIndexEfSearch(n); err != nil {
		return err
	}
	*e = indexEfFlag(n)
	return nil
}

// budgetFlag is --memory-budget: bytes, and whether it was given (an
// explicit 0 asks for no budget, even where bench and search would plan
// under the machine's memory: engine.Spec.MachineBudget).
type budgetFlag struct {
	n   int64
	set bool
}

func (b *budgetFlag) String() string { return strconv.FormatInt(b.n, 10) }

func (b *budgetFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("%q is out of range", s)
	case err != nil:
		return fmt.Errorf("%q is not an integer", s)
	}
	b.n, b.set = n, true
	return nil
}

// loadedIndex is an opened index and how long opening took.
type loadedIndex struct {
	x       *engine.Index
	openDur time.Duration
	// heapBytes is the Go heap share of a --memory-budget plan (0 without);
	// prevLimit the runtime's memory limit before limitHeap changed it.
	heapBytes, prevLimit int64
}

// limitHeap sets the Go runtime's memory limit, under --memory-budget, to
// the plan's heap share plus what the runtime holds once opening is done:
// the command's own live data (queries, ground truth) and the runtime's
// overhead beside the heap (metadata, stacks, profiling buckets). The
// limit counts that overhead too, so one set from the live heap alone
// would sit below what the process already holds and keep the collector
// running continually. GOMEMLIMIT, when set, wins.
func (l *loadedIndex) limitHeap() { l.prevLimit = setHeapLimit(l.heapBytes) }

// setHeapLimit sets the runtime's memory limit to what it holds now plus
// heapBytes, and returns the limit before (0: left alone, without a heap
// share or with GOMEMLIMIT set).
func setHeapLimit(heapBytes int64) int64 {
	if heapBytes == 0 || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	debug.FreeOSMemory() // collect, and return what is no longer held
	held := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(held)
	return debug.SetMemoryLimit(int64(held[0].Value.Uint64()-held[1].Value.Uint64()) + heapBytes)
}

func (l *loadedIndex) Close() {
	l.x.Close()
	if l.prevLimit != 0 {
		debug.SetMemoryLimit(l.prevLimit)
	}
}

// spec translates the flags (and the rerank flags, when given) into the
// engine's load spec.
func (f *indexFlags) spec(path string, rr *rerankFlags) engine.Spec {
	s := engine.Spec{Path: path, Mode: f.mode, Backend: f.backend, CacheBytes: f.cacheBytes, CacheBlock: f.cacheBlock,
		MemoryBudget: f.memoryBudget.n, Semantics: f.semantics, Kernel: f.kernel, BatchReads: f.batchReads,
		ExactFilterMax: f.exactFilterMax, EfSearch: int(f.indexEf), VerifyChecksum: f.verifyChecksum, CAGRASeed: f.cagraSeed,
		Compression: f.compression, GuideDir: f.guideDir, RemoteGuideDir: defaultRemoteGuideDir(), VectorsPath: f.vectors,
		CacheDir: f.cacheDir.value(), Env: procEnv, Workers: f.workers, MachineBudget: f.machine && !f.memoryBudget.set, Beside: f.beside}
	if rr != nil && (rr.vectors != "" || (f.mode == engine.ModeOnDisk && rr.oversample != 0)) {
		s.Rerank = rr.spec() // on_disk without --rerank-vectors: the index file (the engine fills it in)
	}
	return s
}

// spec translates the rerank flags into the engine's rerank spec.
func (f *rerankFlags) spec() *engine.RerankSpec {
	return &engine.RerankSpec{Path: f.vectors, Strategy: f.strategy, Oversample: f.oversample, Metric: f.metric}
}

// preparedIndex is an index planned (prepare) and not yet opened.
type preparedIndex struct {
	plan    *engine.Plan
	bar     *progressBar
	prepDur time.Duration
}

// discard gives up a prepared index that will not be opened.
func (pi *preparedIndex) discard() {
	pi.bar.Done()
	pi.plan.Discard()
}

// prepare checks the flags and plans the index at path (with rr's rerank
// vectors, when given) before the command reads its inputs, so that a
// spec the engine refuses is a usage error whatever those files hold. The
// command serves this one index: on_disk without --memory-budget may be
// planned under the machine's memory (engine.Spec.MachineBudget), and
// what the command reads next (f.beside: prepareWithQueries, ground truth, allow
// lists) is left its room when openFor replans.
func (f *indexFlags) prepare(path string, rr *rerankFlags) (*preparedIndex, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	f.machine = true
	spec := f.spec(path, rr)
	var bar *progressBar
	if f.mode == engine.ModeOnDisk && isTerminal(os.Stderr) {
		bar = newProgressBar(os.Stderr, "building the guide")
		spec.Progress = bar.Update
	}
	plan, err := engine.Prepare(spec)
	if err != nil {
		bar.Done()
		return nil, specError(err)
	}
	return &preparedIndex{plan: plan, bar: bar, prepDur: time.Since(start)}, nil
}

// open replans the prepared index for what the command now holds beside
// it (engine.Plan.Replan) and opens it, warmed when asked.
func (f *indexFlags) open(pi *preparedIndex) (*loadedIndex, error) {
	start := time.Now()
	plan, err := pi.plan.Replan(f.beside)
	var x *engine.Index
	if err == nil {
		// The plan's heap share (or a guide build's, when larger) bounds
		// the heap while the index opens too: what opening reads and drops
		// (parsed headers, read-ahead) is collected as it goes, rather than
		// piling up beside the memory the index pins, inside the same limit.
		prev := setHeapLimit(plan.OpenHeapBytes())
		x, err = plan.Open()
		if prev != 0 {
			debug.SetMemoryLimit(prev)
		}
	}
	pi.bar.Done()
	if err != nil {
		return nil, specError(err)
	}
	if gi, ok := x.Guide(); ok {
		if gi.Rebuilt != "" {
			fmt.Fprintf(os.Stderr, "faiss-sidecar: rebuilt the guide %s: %s\n", gi.Path, gi.Rebuilt)
		}
		if gi.NotSaved != "" {
			fmt.Fprintf(os.Stderr, "faiss-sidecar: warning: the guide was built but not saved, the next open builds it again: %s\n", gi.NotSaved)
		}
	}
	if f.warmup {
		if err := x.Warm(); err != nil {
			x.Close()
			return nil, err
		}
	}
	return &loadedIndex{x: x, openDur: pi.prepDur + time.Since(start), heapBytes: plan.HeapBytes()}, nil
}

// prepareWithQueries prepares the index at path (prepare), then reads
// the first limit rows (0: all) of the query file at queries and counts
// them, as the float vectors they become, beside the index (f.beside).
// Float queries whose dimension is not the float index's are refused
// here, before the index opens (for on_disk, before a guide build);
// queriesFor checks every case once it is open. On an error nothing is
// left prepared.
func (f *indexFlags) prepareWithQueries(path, queries string, limit int, rr *rerankFlags) (*preparedIndex, *vecio.Matrix, error) {
	pi, err := f.prepare(path, rr)
	if err != nil {
		return nil, nil, err
	}
	m, err := vecio.Read(queries, limit, vecio.Queries)
	if err == nil {
		if d, binary := pi.plan.Dim(); !binary && m.Dim != d {
			err = fmt.Errorf("%s: queries have %d values, the index expects %d components", queries, m.Dim, d)
		}
	}
	if err != nil {
		pi.discard()
		return nil, nil, err
	}
	f.beside += m.Bytes() + 3*int64(len(m.U8)) // byte rows become floats on a float index
	return pi, m, nil
}

// openFor opens the prepared index and makes m, read from the query file
// at queries, its queries.
func (f *indexFlags) openFor(pi *preparedIndex, queries string, m *vecio.Matrix) (*loadedIndex, []engine.Query, error) {
	l, err := f.open(pi)
	if err != nil {
		return nil, nil, err
	}
	qs, err := queriesFor(queries, m, l.x)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	l.limitHeap()
	return l, qs, nil
}

// queriesFor checks the rows m of the query file at path against the
// index and makes them its queries.
func queriesFor(path string, m *vecio.Matrix, x *engine.Index) ([]engine.Query, error) {
	if m.Dim != x.Dim() {
		unit := "components"
		if x.Binary() {
			unit = "bytes"
		}
		return nil, fmt.Errorf("%s: queries have %d values, the index expects %d %s", path, m.Dim, x.Dim(), unit)
	}
	qs := make([]engine.Query, m.N)
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
	m, err := vecio.Read(path, 0, vecio.IDs)
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
		fs.Int("k", engine.DefaultK, "neighbors per query"),
		fs.Int("ef-search", 0, "efSearch (0: the value stored in the index)")
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
