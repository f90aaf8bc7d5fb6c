package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
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
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "storage" {
		return runBenchStorage(args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "rerank" {
		return runBenchRerank(args[1:], stdout)
	}
	return runBenchSearch(args, stdout)
}

// searchBenchResult is what `bench INDEX --json` prints.
type searchBenchResult struct {
	Index          string   `json:"index"`
	Mode           string   `json:"mode"`
	Backend        string   `json:"backend"`
	Semantics      string   `json:"semantics"`
	Kernel         string   `json:"kernel"`
	KernelImpl     string   `json:"kernel_impl"`
	Threads        int      `json:"threads"`
	Queries        int      `json:"queries"`
	K              int      `json:"k"`
	EfSearch       int      `json:"ef_search"`        // --ef-search, else --index-ef-search, else the stored value
	EfSearchStored int      `json:"ef_search_stored"` // the efSearch saved in the file
	Searches       int      `json:"searches"`
	Seconds        float64  `json:"seconds"`
	QPS            float64  `json:"qps"`
	P50us          float64  `json:"p50_us"`
	P99us          float64  `json:"p99_us"`
	Recall         *float64 `json:"recall,omitempty"`
	Rerank         string   `json:"rerank,omitempty"`
	Shortlist      int      `json:"shortlist,omitempty"`
	NDisMean       float64  `json:"ndis_mean"`
	BytesPerQuery  float64  `json:"bytes_read_per_query"`
	ReadsPerQuery  float64  `json:"reads_per_query"`
	HitsPerQuery   float64  `json:"cache_hits_per_query"`
	MissPerQuery   float64  `json:"cache_misses_per_query"`
	DevBytesPerQ   float64  `json:"device_bytes_per_query"`
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
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var ix indexFlags
	ix.register(fs)
	queries, k, ef := queryFlags(fs)
	threads := fs.Int("threads", 1, "goroutines searching concurrently")
	gt := fs.String("gt", "", "ground-truth neighbor ids (.ivecs, or an integer .npy) for recall@k")
	duration := fs.Duration("duration", 3*time.Second, "minimum measured time (at least one pass over the queries)")
	maxQueries := fs.Int("max-queries", 0, "use only the first N queries (0: all)")
	fresh := fs.Bool("fresh", false, "measure each query's first run: no warm-up pass, one measured pass (--duration ignored), so no cache holds what an earlier run of the same query read")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured passes to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile (what is live after the measured passes) to this file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	var rr rerankFlags
	rr.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("bench", pos, "INDEX"); err != nil {
		return err
	}
	if err := required("bench", "queries", *queries); err != nil {
		return err
	}
	if err := checkQuery(*k, *ef); err != nil {
		return err
	}
	switch {
	case *threads < 1:
		return usagef("--threads must be ≥ 1")
	case *maxQueries < 0:
		return usagef("--max-queries %d is negative (0: all)", *maxQueries)
	case *duration <= 0:
		return usagef("--duration %v must be positive", *duration)
	}
	if err := rr.validate(); err != nil {
		return err
	}
	if err := checkGuideDir(ix.guideDir); err != nil {
		return err
	}
	ix.workers = *threads                                                    // the memory plan counts the queries that run at once
	pi, qm, err := ix.prepareWithQueries(pos[0], *queries, *maxQueries, &rr) // the engine's refusals of the flags before any input is read
	if err != nil {
		return err
	}
	var gtIDs *vecio.Matrix // read and checked before the index opens (a guide build may come first)
	if *gt != "" {
		if gtIDs, err = vecio.Read(*gt, qm.N, vecio.GroundTruth); err != nil {
			pi.discard()
			return err
		}
		if m := gtIDs; m.I64 == nil || m.N < qm.N || m.Dim < *k {
			pi.discard()
			return fmt.Errorf("%s: need ≥ %d rows of ≥ %d integer ids", *gt, qm.N, *k)
		}
		ix.beside += gtIDs.Bytes()
	}
	l, qs, err := ix.openFor(pi, *queries, qm)
	if err != nil {
		return err
	}
	defer l.Close()
	if len(qs) == 0 {
		return fmt.Errorf("%s: no queries", *queries)
	}
	req := engine.FAISSRequest{K: *k, EfSearch: *ef}
	rescore := l.x.HasRerank()
	var fq [][]float32
	if rescore {
		if fq, err = rr.floatQueries(l.x, qs, l.x.RerankDim()); err != nil {
			return err
		}
	}
	// one query, rescored when the index has rerank vectors: what both passes time.
	search := func(i int64, sc *engine.Scratch, fs *rerank.FetchStats) ([]hnswsearch.Result, hnswsearch.Stats, error) {
		var rq []float32
		if fq != nil {
			rq = fq[i]
		}
		return l.x.SearchFAISS(qs[i], rq, req, sc, fs)
	}
	// Warm-up pass (also the results recall is computed from); with
	// --fresh, the measured pass's results instead.
	first := make([]hnswsearch.BatchResult, len(qs))
	var firstQuery time.Duration
	for i := range qs {
		if *fresh {
			break // the measured pass fills first
		}
		r := &first[i]
		t0 := time.Now()
		if r.Hits, r.Stats, r.Err = search(int64(i), nil, nil); r.Err != nil {
			return fmt.Errorf("query %d: %w", i, r.Err)
		}
		if i == 0 {
			firstQuery = time.Since(t0)
		}
	}
	res := searchBenchResult{Index: pos[0], Mode: ix.mode, Backend: l.x.Backend(), Semantics: ix.semantics, Kernel: ix.kernel,
		KernelImpl: distance.FastImpl, Threads: *threads, Queries: len(qs), K: *k, EfSearch: *ef, OpenMs: float64(l.openDur.Microseconds()) / 1e3}
	if res.EfSearchStored = l.x.StoredEfSearch(); res.EfSearch == 0 {
		res.EfSearch = l.x.EfSearch() // the stored value, or --index-ef-search
	}
	if ix.kernel == "exact" {
		res.KernelImpl = "sequential"
	}
	if rescore {
		res.Rerank, res.Shortlist = l.x.RerankStrategy(), l.x.ShortlistSize(*k, req.Oversample)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// Measured passes: workers take queries round-robin until the duration.
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		lat      []time.Duration
		ndis     int64
		bytesRd  int64
		readsN   int64
		io       partial.Tally
		fetch    rerank.FetchStats
		searches int64
		pinned   int64
		vcBytes  int64
		vcHits   int64
		batches  int64
		ahead    int64
		lahead   int64
		lused    int64
		expanded int64
		runErr   error
	)
	total := int64(len(qs))
	devBefore, _, _ := processIO()
	start := time.Now()
	deadline := start.Add(*duration)
	for range *threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var my []time.Duration
			var nd, br, rd, pin, vcb, vch, bat, ahd, exp, lah, lus int64
			var myIO partial.Tally
			var myFetch rerank.FetchStats
			var sc engine.Scratch
			var dst []hnswsearch.Result
			for {
				i := next.Add(1) - 1
				if i >= total && (*fresh || time.Now().After(deadline)) {
					break
				}
				t0 := time.Now()
				var st hnswsearch.Stats
				var err error
				dst, st, err = search(i%total, &sc, &myFetch)
				my = append(my, time.Since(t0))
				if *fresh && err == nil {
					first[i].Hits = slices.Clone(dst)
					if i == 0 {
						firstQuery = my[len(my)-1]
					}
				}
				if err != nil {
					mu.Lock()
					runErr = err
					mu.Unlock()
					break
				}
				nd += int64(st.NDis)
				br += st.BytesRead
				rd += st.Reads
				myIO.CacheHits += st.IO.CacheHits
				myIO.CacheMisses += st.IO.CacheMisses
				myIO.DeviceBytes += st.IO.DeviceBytes
				myIO.DeviceReads += st.IO.DeviceReads
				pin += st.BytesPinned
				vcb += st.BytesVectorCache
				vch += st.VectorCacheHits
				bat += st.Batches
				ahd += st.ReadAhead
				lah += st.ListsAhead
				lus += st.ListsAheadUsed
				exp += int64(st.Expanded)
			}
			mu.Lock()
			lat = append(lat, my...)
			ndis += nd
			bytesRd += br
			readsN += rd
			io.CacheHits += myIO.CacheHits
			io.CacheMisses += myIO.CacheMisses
			io.DeviceBytes += myIO.DeviceBytes
			io.DeviceReads += myIO.DeviceReads
			fetch.Vectors += myFetch.Vectors
			fetch.Reads += myFetch.Reads
			fetch.BytesRead += myFetch.BytesRead
			fetch.CacheHits += myFetch.CacheHits
			fetch.Decoded += myFetch.Decoded
			pinned += pin
			vcBytes += vcb
			vcHits += vch
			batches += bat
			ahead += ahd
			lahead += lah
			lused += lus
			expanded += exp
			searches += int64(len(my))
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if runErr != nil {
		return runErr
	}
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			return err
		}
	}
	devAfter, _, _ := processIO()
	if gtIDs != nil {
		hits := 0
		for i, r := range first {
			want := map[int64]bool{}
			for _, id := range gtIDs.RowI64(i)[:*k] {
				want[id] = true
			}
			for _, h := range r.Hits[:min(*k, len(r.Hits))] {
				if want[h.ID] {
					hits++
				}
			}
		}
		rec := float64(hits) / float64(len(qs)**k)
		res.Recall = &rec
	}
	slices.Sort(lat)
	res.FirstQueryUs = float64(firstQuery.Nanoseconds()) / 1e3
	res.DevicePerQuery = float64(devAfter-devBefore) / float64(searches)
	res.PeakRSS = peakRSS()
	res.Searches = int(searches)
	res.Seconds = elapsed.Seconds()
	res.QPS = float64(searches) / elapsed.Seconds()
	res.P50us = float64(lat[len(lat)/2]) / 1e3
	res.P99us = float64(lat[len(lat)*99/100]) / 1e3
	res.NDisMean = float64(ndis) / float64(searches)
	res.BytesPerQuery = float64(bytesRd) / float64(searches)
	res.ReadsPerQuery = float64(readsN) / float64(searches)
	res.HitsPerQuery = float64(io.CacheHits) / float64(searches)
	res.MissPerQuery = float64(io.CacheMisses) / float64(searches)
	res.DevBytesPerQ = float64(io.DeviceBytes) / float64(searches)
	res.DevReadsPerQ = float64(io.DeviceReads) / float64(searches)
	if rescore {
		res.RerankReadsPerQ = float64(fetch.Reads) / float64(searches)
		res.RerankBytesPerQ = float64(fetch.BytesRead) / float64(searches)
		res.RerankCacheHitsPerQ = float64(fetch.CacheHits) / float64(searches)
		res.RerankDecodedPerQ = float64(fetch.Decoded) / float64(searches)
	}
	res.PinnedPerQ = float64(pinned) / float64(searches)
	res.VecCachePerQ = float64(vcBytes) / float64(searches)
	res.BatchesPerQ = float64(batches) / float64(searches)
	res.ReadAheadPerQ = float64(ahead) / float64(searches)
	res.ListsAheadPerQ = float64(lahead) / float64(searches)
	res.ListsAheadUsedPerQ = float64(lused) / float64(searches)
	res.ExpandedPerQ = float64(expanded) / float64(searches)
	if ndis > 0 {
		res.VecCacheHitPct = 100 * float64(vcHits) / float64(ndis)
	}
	if vs := l.x.VectorCache(); vs.Slots > 0 {
		res.VectorCache = vs
	}
	res.ResidentBytes = l.x.HeldBytes()
	if st, ok := l.x.StorageStats(); ok {
		res.ResidentBytes += st.ResidentBytes
		res.StorageStats = st
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "%s (%s/%s, %s, %s kernel): %s, k=%d ef=%d: %.0f QPS, p50 %.1f µs, p99 %.1f µs, %.0f distances/query, %.0f bytes read/query",
		pos[0], ix.mode, l.x.Backend(), ix.semantics, res.KernelImpl, plural(*threads, "thread"), *k, res.EfSearch, res.QPS, res.P50us, res.P99us, res.NDisMean, res.BytesPerQuery)
	if res.Recall != nil {
		fmt.Fprintf(stdout, ", recall@%d %.4f", *k, *res.Recall)
	}
	fmt.Fprintln(stdout)
	return nil
}

// storageResult is what `bench storage --json` prints.
type storageResult struct {
	File              string  `json:"file"`
	Backend           string  `json:"backend"`
	FileSize          int64   `json:"file_size"`
	Cold              bool    `json:"cold"`
	Warmup            bool    `json:"warmup"`
	Reads             int     `json:"reads"`
	ReadSize          int     `json:"read_size"`
	Inflight          int     `json:"inflight"`
	Seconds           float64 `json:"seconds"`
	ReadsPerS         float64 `json:"reads_per_s"`
	P50us             float64 `json:"p50_us"`
	P99us             float64 `json:"p99_us"`
	BytesRequested    int64   `json:"bytes_requested"`
	DeviceReadBytes   int64   `json:"device_read_bytes"`
	DevicePerReqByte  float64 `json:"device_bytes_per_requested_byte"`
	ReadCalls         int64   `json:"read_calls"`
	CacheHits         int64   `json:"cache_hits"`
	CacheMisses       int64   `json:"cache_misses"`
	ResidentBytes     int64   `json:"resident_bytes"`
	ProcessRSSBytes   int64   `json:"process_rss_bytes"`
	ProcessRSSBefore  int64   `json:"process_rss_before_bytes"`
	BackendStatsAfter any     `json:"backend_stats"`
}

func runBenchStorage(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench storage", flag.ContinueOnError)
	backend := fs.String("backend", "", backendHelp)
	cold := fs.Bool("cold", false, "evict the file from the page cache (posix_fadvise DONTNEED) before the run")
	reads := fs.Int("reads", 100000, "number of random reads")
	size := fs.Int("read-size", 4096, "bytes per read (reads start at multiples of it)")
	inflight := fs.Int("inflight", 1, "reads in flight (goroutines issuing reads)")
	cacheBytes := fs.Int64("cache-bytes", 0, "block cache budget for pread/direct/zstd (0: backend default)")
	var cd cacheDirFlags
	cd.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	seed := fs.Uint64("seed", 1, "random seed for the offsets")
	warmup := fs.Bool("warmup", false, "read every offset once, untimed, before the measured pass (a warm cache)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("bench storage", pos, "FILE"); err != nil {
		return err
	}
	if *reads <= 0 || *size <= 0 || *inflight <= 0 {
		return usagef("--reads, --read-size and --inflight must be positive")
	}
	if *cacheBytes < 0 {
		return usagef("--cache-bytes %d is negative", *cacheBytes)
	}
	if err := checkBackend(*backend); err != nil {
		return err
	}
	path := pos[0]
	if *cold {
		if err := evictPageCache(path); err != nil {
			return err
		}
	}
	_, rssBefore, _ := processIO()
	s, err := openSource(path, *backend, *cacheBytes, cd)
	if err != nil {
		return err
	}
	defer s.Close()
	nblocks := s.Size() / int64(*size)
	if nblocks == 0 {
		return fmt.Errorf("%s: smaller than one read of %d bytes", path, *size)
	}
	r := rand.New(rand.NewPCG(*seed, 99))
	offsets := make([]int64, *reads)
	for i := range offsets {
		offsets[i] = r.Int64N(nblocks) * int64(*size)
	}
	lat := make([]time.Duration, *reads)
	if *warmup {
		buf := make([]byte, *size)
		for _, off := range offsets {
			if _, err := s.ReadAtContext(context.Background(), buf, off, nil); err != nil {
				return err
			}
		}
	}
	devBefore, _, err := processIO()
	if err != nil {
		return err
	}
	var (
		wg      sync.WaitGroup
		next    = make(chan int, *inflight)
		errOnce sync.Once
		runErr  error
	)
	start := time.Now()
	for range *inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, *size)
			for i := range next {
				t0 := time.Now()
				if _, err := s.ReadAtContext(context.Background(), buf, offsets[i], nil); err != nil {
					errOnce.Do(func() { runErr = err })
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	for i := range offsets {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	if runErr != nil {
		return runErr
	}
	devAfter, rss, _ := processIO()
	slices.Sort(lat)
	res := storageResult{
		File: path, Backend: backendName(s), FileSize: s.Size(), Cold: *cold, Warmup: *warmup, Reads: *reads, ReadSize: *size,
		Inflight: *inflight, Seconds: elapsed.Seconds(), ReadsPerS: float64(*reads) / elapsed.Seconds(),
		P50us: float64(lat[len(lat)/2]) / 1e3, P99us: float64(lat[len(lat)*99/100]) / 1e3,
		BytesRequested: int64(*reads) * int64(*size), DeviceReadBytes: devAfter - devBefore,
		ProcessRSSBytes: rss, ProcessRSSBefore: rssBefore,
	}
	res.DevicePerReqByte = float64(res.DeviceReadBytes) / float64(res.BytesRequested)
	if sr, ok := s.(partial.StatsReporter); ok {
		st := sr.Stats()
		res.ReadCalls, res.CacheHits, res.CacheMisses, res.ResidentBytes = st.ReadCalls, st.CacheHits, st.CacheMisses, st.ResidentBytes
		res.BackendStatsAfter = st
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "%s (%s, %s, cold=%v): %d reads of %d B, %d in flight: %.0f reads/s, p50 %.1f µs, p99 %.1f µs, device bytes per requested byte %.3f, resident %s\n",
		path, res.Backend, human(res.FileSize), *cold, *reads, *size, *inflight, res.ReadsPerS, res.P50us, res.P99us, res.DevicePerReqByte, human(res.ResidentBytes))
	return nil
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
