package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
)

// searchBenchResult is what `bench INDEX --json` prints.
type searchBenchResult struct {
	Index          string         `json:"index"`
	Mode           engine.Mode    `json:"mode"`
	Backend        engine.Backend `json:"backend"`
	Semantics      string         `json:"semantics"`
	Kernel         string         `json:"kernel"`
	KernelImpl     string         `json:"kernel_impl"`
	Threads        int            `json:"threads"`
	Queries        int            `json:"queries"`
	K              int            `json:"k"`
	EfSearch       int            `json:"ef_search"`        // --ef-search, else --index-ef-search, else the stored value
	EfSearchStored int            `json:"ef_search_stored"` // the efSearch saved in the file
	Searches       int            `json:"searches"`
	Seconds        float64        `json:"seconds"`
	QPS            float64        `json:"qps"`
	P50us          float64        `json:"p50_us"`
	P99us          float64        `json:"p99_us"`
	Recall         *float64       `json:"recall,omitempty"`
	Rerank         string         `json:"rerank,omitempty"`
	Shortlist      int            `json:"shortlist,omitempty"`
	NDisMean       float64        `json:"ndis_mean"`
	BytesPerQuery  float64        `json:"bytes_read_per_query"`
	ReadsPerQuery  float64        `json:"reads_per_query"`
	HitsPerQuery   float64        `json:"cache_hits_per_query"`
	MissPerQuery   float64        `json:"cache_misses_per_query"`
	DevBytesPerQ   float64        `json:"device_bytes_per_query"`
	// DevReadsPerQ: the search's reads that reached the device (backends
	// that account them); RerankReadsPerQ: the rerank's read requests
	// (after coalescing) and their bytes. Their sum is R, the round of
	// device reads a cold query waits on.
	DevReadsPerQ    float64 `json:"device_reads_per_query"`
	RerankReadsPerQ float64 `json:"rerank_reads_per_query,omitempty"`
	RerankBytesPerQ float64 `json:"rerank_bytes_per_query,omitempty"`
	// RerankCacheHitsPerQ: shortlisted vectors the vector cache served
	// (on_disk under a memory budget), neither read nor in R.
	RerankCacheHitsPerQ float64 `json:"rerank_cache_hits_per_query,omitempty"`
	// RerankDecodedPerQ: shortlisted vectors an exact guide gave back
	// without a read (on_disk 4x on data of at most 256 values a dimension)
	RerankDecodedPerQ float64 `json:"rerank_decoded_per_query,omitempty"`
	PinnedPerQ        float64 `json:"pinned_bytes_per_query"`       // neighbor lists served from pinned memory
	VecCachePerQ      float64 `json:"vector_cache_bytes_per_query"` // vectors served by the vector cache
	VecCacheHitPct    float64 `json:"vector_cache_hit_pct"`         // share of vector fetches it served
	VectorCache       any     `json:"vector_cache,omitempty"`
	BatchesPerQ       float64 `json:"batches_per_query"`    // batched reads (round trips) per query
	ReadAheadPerQ     float64 `json:"read_ahead_per_query"` // vectors read ahead into the vector cache
	// Level-0 lists read ahead with an expanded node's (on storage, not
	// pinned), and those the search then expanded.
	ListsAheadPerQ     float64 `json:"lists_ahead_per_query"`
	ListsAheadUsedPerQ float64 `json:"lists_ahead_used_per_query"`
	ExpandedPerQ       float64 `json:"expanded_per_query"` // level-0 nodes expanded
	OpenMs             float64 `json:"open_ms"`
	FirstQueryUs       float64 `json:"first_query_us"`
	DevicePerQuery     float64 `json:"device_read_bytes_per_query"`
	PeakRSS            int64   `json:"peak_rss_bytes"`
	ResidentBytes      int64   `json:"resident_bytes"`
	StorageStats       any     `json:"storage_stats,omitempty"`
}

// peakRSS is the process's peak resident set (VmHWM), 0 where unknown.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v * 1024
		}
	}
	return 0
}

func runBenchSearch(args []string, stdout io.Writer) error {
	b, err := parseBenchSearch(args)
	if err != nil {
		return err
	}
	l, qs, gt, err := b.open()
	if err != nil {
		return err
	}
	defer l.Close()
	if len(qs) == 0 {
		return fmt.Errorf("%s: no queries", b.queries)
	}
	qp, err := l.x.Plan(b.req)
	if err != nil {
		return err
	}
	if l.x.HasRerank() {
		if err := b.rr.addRescoreQueries(l.x, qs); err != nil {
			return err
		}
	}
	search := func(i int, sc *engine.Scratch) ([]engine.Result, engine.Profile, error) {
		return l.x.Search(&qp, qs[i], sc)
	}
	first, firstQuery, err := b.warm(len(qs), search)
	if err != nil {
		return err
	}
	res := b.describe(l, &qp, len(qs))
	if b.cpuProfile != "" {
		stop, err := startCPUProfile(b.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	devBefore, _, _ := processIO()
	tot, elapsed, err := b.measure(len(qs), search, first, &firstQuery)
	if err != nil {
		return err
	}
	if b.memProfile != "" {
		if err := writeHeapProfile(b.memProfile); err != nil {
			return err
		}
	}
	devAfter, _, _ := processIO()
	if gt != nil {
		rec := recall(first, gt, b.req.K)
		res.Recall = &rec
	}
	res.FirstQueryUs = float64(firstQuery.Nanoseconds()) / 1e3
	res.DevicePerQuery = float64(devAfter-devBefore) / float64(len(tot.lat))
	res.PeakRSS = peakRSS()
	res.Seconds = elapsed.Seconds()
	tot.report(&res, l.x.HasRerank())
	if vs := l.x.VectorCache(); vs.Slots > 0 {
		res.VectorCache = vs
	}
	res.ResidentBytes = l.x.HeldBytes()
	if st, ok := l.x.StorageStats(); ok {
		res.ResidentBytes += st.ResidentBytes
		res.StorageStats = st
	}
	if b.asJSON {
		return printJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "%s (%s/%s, %s, %s kernel): %s, k=%d ef=%d: %.0f QPS, p50 %.1f µs, p99 %.1f µs, %.0f distances/query, %.0f bytes read/query",
		b.index, b.ix.mode, l.x.Backend(), b.ix.semantics, res.KernelImpl, plural(b.threads, "thread"), b.req.K, res.EfSearch, res.QPS, res.P50us, res.P99us, res.NDisMean, res.BytesPerQuery)
	if res.Recall != nil {
		fmt.Fprintf(stdout, ", recall@%d %.4f", b.req.K, *res.Recall)
	}
	fmt.Fprintln(stdout)
	return nil
}

// benchSearch is one run of `bench INDEX`: its flags and its request.
type benchSearch struct {
	ix                     indexFlags
	rr                     rerankFlags
	req                    engine.Request
	index, queries, gt     string
	cpuProfile, memProfile string
	threads, maxQueries    int
	duration               time.Duration
	fresh, asJSON          bool
}

// parseBenchSearch reads and checks bench's flags; nothing is opened.
func parseBenchSearch(args []string) (*benchSearch, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	b := new(benchSearch)
	b.ix.register(fs)
	queries, k, ef := queryFlags(fs)
	threads := fs.Int("threads", 1, "goroutines searching concurrently")
	gt := fs.String("gt", "", "ground-truth neighbor ids (.ivecs, or an integer .npy) for recall@k")
	duration := fs.Duration("duration", 3*time.Second, "minimum measured time (at least one pass over the queries)")
	maxQueries := fs.Int("max-queries", 0, "use only the first N queries (0: all)")
	fresh := fs.Bool("fresh", false, "measure each query's first run: no warm-up pass, one measured pass (--duration ignored), so no cache holds what an earlier run of the same query read")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured passes to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile (what is live after the measured passes) to this file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	b.rr.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if err := checkArgs("bench", pos, "INDEX"); err != nil {
		return nil, err
	}
	if err := required("bench", "queries", *queries); err != nil {
		return nil, err
	}
	b.req = queryRequest(*k, *ef)
	if err := checkRequest(b.req); err != nil {
		return nil, err
	}
	switch {
	case *threads < 1:
		return nil, usagef("--threads must be ≥ 1")
	case *maxQueries < 0:
		return nil, usagef("--max-queries %d is negative (0: all)", *maxQueries)
	case *duration <= 0:
		return nil, usagef("--duration %v must be positive", *duration)
	}
	if err := b.rr.validate(); err != nil {
		return nil, err
	}
	if err := checkGuideDir(b.ix.guideDir); err != nil {
		return nil, err
	}
	b.index, b.queries, b.gt = pos[0], *queries, *gt
	b.cpuProfile, b.memProfile = *cpuProfile, *memProfile
	b.threads, b.maxQueries, b.duration = *threads, *maxQueries, *duration
	b.fresh, b.asJSON = *fresh, *asJSON
	return b, nil
}

// open plans the index, reads the queries and the ground truth (checked
// before the index opens: a guide build may come first), then opens it.
func (b *benchSearch) open() (*loadedIndex, []engine.Query, *vecio.Matrix, error) {
	b.ix.workers = b.threads                                                        // the memory plan counts the queries that run at once
	pi, qm, err := b.ix.prepareWithQueries(b.index, b.queries, b.maxQueries, &b.rr) // the engine's refusals of the flags before any input is read
	if err != nil {
		return nil, nil, nil, err
	}
	var gt *vecio.Matrix
	if b.gt != "" {
		if gt, err = vecio.Read(b.gt, qm.N, vecio.GroundTruth); err != nil {
			pi.discard()
			return nil, nil, nil, err
		}
		if m := gt; m.I64 == nil || m.N < qm.N || m.Dim < b.req.K {
			pi.discard()
			return nil, nil, nil, fmt.Errorf("%s: need ≥ %d rows of ≥ %d integer ids", b.gt, qm.N, b.req.K)
		}
		b.ix.beside += gt.Bytes()
	}
	l, qs, err := b.ix.openFor(pi, b.queries, qm)
	if err != nil {
		return nil, nil, nil, err
	}
	return l, qs, gt, nil
}

// searchFunc runs query i of the benchmark in sc (nil: its own buffers).
type searchFunc func(i int, sc *engine.Scratch) ([]engine.Result, engine.Profile, error)

// warm runs the warm-up pass over n queries, whose rows recall is computed
// from, and times the first query; with --fresh it runs nothing (the
// measured pass fills the rows in).
func (b *benchSearch) warm(n int, search searchFunc) (first [][]engine.Result, firstQuery time.Duration, err error) {
	first = make([][]engine.Result, n)
	if b.fresh {
		return first, 0, nil
	}
	for i := range n {
		t0 := time.Now()
		if first[i], _, err = search(i, nil); err != nil {
			return nil, 0, fmt.Errorf("query %d: %w", i, err)
		}
		if i == 0 {
			firstQuery = time.Since(t0)
		}
	}
	return first, firstQuery, nil
}

// describe is the result's description of the run, before it is measured.
func (b *benchSearch) describe(l *loadedIndex, qp *engine.QueryPlan, n int) searchBenchResult {
	res := searchBenchResult{Index: b.index, Mode: b.ix.mode, Backend: l.x.Backend(), Semantics: b.ix.semantics, Kernel: b.ix.kernel,
		KernelImpl: procEnv.KernelImpl(b.ix.kernel), Threads: b.threads, Queries: n, K: b.req.K, EfSearch: b.req.EfSearch,
		OpenMs: float64(l.openDur.Microseconds()) / 1e3}
	if res.EfSearchStored = l.x.StoredEfSearch(); res.EfSearch == 0 {
		res.EfSearch = l.x.EfSearch() // the stored value, or --index-ef-search
	}
	if l.x.HasRerank() {
		res.Rerank, res.Shortlist = l.x.RerankStrategy(), qp.Shortlist()
	}
	return res
}

// measure runs the measured passes: --threads workers take the n queries
// round-robin until --duration has passed (one pass with --fresh, which
// fills first and firstQuery), each summing what its queries report.
func (b *benchSearch) measure(n int, search searchFunc, first [][]engine.Result, firstQuery *time.Duration) (benchTotals, time.Duration, error) {
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		tot    benchTotals
		runErr error
	)
	total := int64(n)
	start := time.Now()
	deadline := start.Add(b.duration)
	for range b.threads {
		wg.Go(func() {
			var my benchTotals
			var sc engine.Scratch
			for {
				i := next.Add(1) - 1
				if i >= total && (b.fresh || time.Now().After(deadline)) {
					break
				}
				t0 := time.Now()
				hits, prof, err := search(int(i%total), &sc)
				d := time.Since(t0)
				my.lat = append(my.lat, d)
				if b.fresh && err == nil {
					first[i] = slices.Clone(hits)
					if i == 0 {
						*firstQuery = d
					}
				}
				if err != nil {
					mu.Lock()
					runErr = err
					mu.Unlock()
					break
				}
				my.add(&prof)
			}
			mu.Lock()
			tot.merge(&my)
			mu.Unlock()
		})
	}
	wg.Wait()
	return tot, time.Since(start), runErr
}

// benchTotals sums what the measured queries report: one worker's, then
// every worker's.
type benchTotals struct {
	lat                                        []time.Duration
	ndis, bytesRead, reads                     int64
	cacheHits, cacheMisses, devBytes, devReads int64
	pinned, vcBytes, vcHits, batches, ahead    int64
	listsAhead, listsAheadUsed, expanded       int64
	fetch                                      engine.FetchStats
}

// add counts one query's profile (its latency is in lat already).
func (t *benchTotals) add(p *engine.Profile) {
	t.ndis += int64(p.NDis)
	t.bytesRead += p.BytesRead
	t.reads += p.Reads
	t.cacheHits += p.IO.CacheHits
	t.cacheMisses += p.IO.CacheMisses
	t.devBytes += p.IO.DeviceBytes
	t.devReads += p.IO.DeviceReads
	t.pinned += p.BytesPinned
	t.vcBytes += p.BytesVectorCache
	t.vcHits += p.VectorCacheHits
	t.batches += p.Batches
	t.ahead += p.ReadAhead
	t.listsAhead += p.ListsAhead
	t.listsAheadUsed += p.ListsAheadUsed
	t.expanded += int64(p.Expanded)
	if f := p.Rerank; f != nil {
		t.fetch.Vectors += f.Vectors
		t.fetch.Reads += f.Reads
		t.fetch.BytesRead += f.BytesRead
		t.fetch.CacheHits += f.CacheHits
		t.fetch.Decoded += f.Decoded
	}
}

// merge adds u's sums to t's.
func (t *benchTotals) merge(u *benchTotals) {
	t.lat = append(t.lat, u.lat...)
	t.ndis += u.ndis
	t.bytesRead += u.bytesRead
	t.reads += u.reads
	t.cacheHits += u.cacheHits
	t.cacheMisses += u.cacheMisses
	t.devBytes += u.devBytes
	t.devReads += u.devReads
	t.pinned += u.pinned
	t.vcBytes += u.vcBytes
	t.vcHits += u.vcHits
	t.batches += u.batches
	t.ahead += u.ahead
	t.listsAhead += u.listsAhead
	t.listsAheadUsed += u.listsAheadUsed
	t.expanded += u.expanded
	t.fetch.Vectors += u.fetch.Vectors
	t.fetch.Reads += u.fetch.Reads
	t.fetch.BytesRead += u.fetch.BytesRead
	t.fetch.CacheHits += u.fetch.CacheHits
	t.fetch.Decoded += u.fetch.Decoded
}

// report fills res's throughput, latencies and per-query figures from
// the sums (res.Seconds set); rescored adds the rerank's reads.
func (t *benchTotals) report(res *searchBenchResult, rescored bool) {
	searches := float64(len(t.lat))
	slices.Sort(t.lat)
	res.Searches = len(t.lat)
	res.QPS = searches / res.Seconds
	res.P50us = float64(t.lat[len(t.lat)/2]) / 1e3
	res.P99us = float64(t.lat[len(t.lat)*99/100]) / 1e3
	res.NDisMean = float64(t.ndis) / searches
	res.BytesPerQuery = float64(t.bytesRead) / searches
	res.ReadsPerQuery = float64(t.reads) / searches
	res.HitsPerQuery = float64(t.cacheHits) / searches
	res.MissPerQuery = float64(t.cacheMisses) / searches
	res.DevBytesPerQ = float64(t.devBytes) / searches
	res.DevReadsPerQ = float64(t.devReads) / searches
	if rescored {
		res.RerankReadsPerQ = float64(t.fetch.Reads) / searches
		res.RerankBytesPerQ = float64(t.fetch.BytesRead) / searches
		res.RerankCacheHitsPerQ = float64(t.fetch.CacheHits) / searches
		res.RerankDecodedPerQ = float64(t.fetch.Decoded) / searches
	}
	res.PinnedPerQ = float64(t.pinned) / searches
	res.VecCachePerQ = float64(t.vcBytes) / searches
	res.BatchesPerQ = float64(t.batches) / searches
	res.ReadAheadPerQ = float64(t.ahead) / searches
	res.ListsAheadPerQ = float64(t.listsAhead) / searches
	res.ListsAheadUsedPerQ = float64(t.listsAheadUsed) / searches
	res.ExpandedPerQ = float64(t.expanded) / searches
	if t.ndis > 0 {
		res.VecCacheHitPct = 100 * float64(t.vcHits) / float64(t.ndis)
	}
}

// recall is recall@k of the rows against the ground truth's first k ids.
func recall(rows [][]engine.Result, gt *vecio.Matrix, k int) float64 {
	hits := 0
	for i, r := range rows {
		want := map[int64]bool{}
		for _, id := range gt.RowI64(i)[:k] {
			want[id] = true
		}
		for _, h := range r[:min(k, len(r))] {
			if want[h.ID] {
				hits++
			}
		}
	}
	return float64(hits) / float64(len(rows)*k)
}

// startCPUProfile writes a CPU profile to path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeHeapProfile writes what the heap holds live, after a collection.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
