package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

type rerankBenchResult struct {
	Vectors         string  `json:"vectors"`
	Layout          string  `json:"layout"`
	Strategy        string  `json:"strategy"`
	Shortlist       int     `json:"shortlist"`
	Trials          int     `json:"trials"`
	Cold            bool    `json:"cold"`
	P50ms           float64 `json:"p50_ms"`
	P99ms           float64 `json:"p99_ms"`
	VectorsPerS     float64 `json:"vectors_per_s"`
	BytesPerVector  float64 `json:"bytes_read_per_vector"` // from /proc/self/io read_bytes
	ReadsPerVector  float64 `json:"reads_per_vector"`      // requests after coalescing
	RequestedPerVec float64 `json:"requested_bytes_per_vector"`
}

// runBenchRerank times fetching and rescoring random shortlists.
func runBenchRerank(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench rerank", flag.ContinueOnError)
	vectors := fs.String("vectors", "", "vector file: .vec, .fvecs or a FAISS flat file")
	n := fs.Int("shortlist", 1000, "vectors per trial")
	trials := fs.Int("trials", 20, "trials")
	strategy := fs.String("strategy", rerank.StrategyDirect, "read strategy: "+strings.Join(rerank.Strategies, ", "))
	workers := fs.Int("workers", 128, "direct: reads kept in flight through io_uring (independent of search concurrency)")
	cold := fs.Bool("cold", false, "evict the file from the page cache (posix_fadvise DONTNEED) before every trial")
	asJSON := fs.Bool("json", false, "print one JSON object")
	seed := fs.Uint64("seed", 3, "random seed")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("bench rerank", pos); err != nil {
		return err
	}
	if err := required("bench rerank", "vectors", *vectors); err != nil {
		return err
	}
	switch {
	case *n <= 0 || *trials <= 0 || *workers <= 0:
		return usagef("--shortlist, --trials and --workers must be positive")
	case !slices.Contains(rerank.Strategies, *strategy):
		return usagef("unknown --strategy %q (known: %s)", *strategy, strings.Join(rerank.Strategies, ", "))
	}
	s, err := engine.OpenVectors(procEnv, *vectors, *strategy, *workers)
	if err != nil {
		return err
	}
	defer s.Close()
	if int64(*n) > s.Count {
		return fmt.Errorf("%s holds %d vectors, fewer than --shortlist %d", *vectors, s.Count, *n)
	}
	r := rand.New(rand.NewPCG(*seed, 1))
	q := make([]float32, s.Dim)
	for j := range q {
		q[j] = float32(r.NormFloat64())
	}
	lat := make([]time.Duration, 0, *trials)
	var st rerank.FetchStats
	var dev int64
	labels := make([]int32, *n)
	for range *trials {
		seen := map[int32]bool{}
		for i := range labels {
			for {
				l := int32(r.Int64N(s.Count))
				if !seen[l] {
					seen[l], labels[i] = true, l
					break
				}
			}
		}
		if *cold {
			if err := evictPageCache(s.Path); err != nil {
				return err
			}
		}
		before, _, err := processIO()
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := s.Rescore(q, labels, 10, false, &st); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		after, _, _ := processIO()
		dev += after - before
	}
	var total time.Duration
	for _, d := range lat {
		total += d
	}
	slices.Sort(lat)
	res := rerankBenchResult{Vectors: *vectors, Layout: s.Kind, Strategy: *strategy, Shortlist: *n, Trials: *trials, Cold: *cold,
		P50ms: float64(lat[len(lat)/2]) / 1e6, P99ms: float64(lat[min(len(lat)-1, len(lat)*99/100)]) / 1e6,
		VectorsPerS: float64(st.Vectors) / total.Seconds(), BytesPerVector: float64(dev) / float64(st.Vectors),
		ReadsPerVector: float64(st.Reads) / float64(st.Vectors), RequestedPerVec: float64(st.BytesRead) / float64(st.Vectors)}
	if *asJSON {
		return printJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "%s (%s, %s, cold=%v): shortlist %d × %d trials: p50 %.2f ms, p99 %.2f ms, %.0f vectors/s, %.0f device bytes/vector\n",
		*vectors, s.Kind, *strategy, *cold, *n, *trials, res.P50ms, res.P99ms, res.VectorsPerS, res.BytesPerVector)
	return nil
}
