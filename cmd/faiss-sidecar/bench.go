package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
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
	s, backendName, err := openSource(path, *backend, *cacheBytes, cd)
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
		File: path, Backend: string(backendName), FileSize: s.Size(), Cold: *cold, Warmup: *warmup, Reads: *reads, ReadSize: *size,
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
