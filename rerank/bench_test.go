package rerank

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// BenchmarkRescoreWarm rescores random shortlists of 100 fashion-mnist
// vectors in place from a warm mapping of the FAISS file (on_disk's
// rerank without a memory budget), prefetching 0, 4, 8 or 16 vectors ahead,
// one arm after another in one run:
//
//	go test -run='^$' -bench=RescoreWarm -benchtime 3x ./rerank
func BenchmarkRescoreWarm(b *testing.B) {
	s, err := Open("../bench-data/fmnist.faiss", "mmap")
	if err != nil {
		b.Skipf("no bench data (%v): run bench/gen_search_data.py", err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const nq, short = 200, 100
	labels := make([][]int32, nq)
	queries := make([][]float32, nq)
	for i := range labels {
		labels[i] = make([]int32, short)
		for j := range labels[i] {
			labels[i][j] = int32(rng.IntN(int(s.Count)))
		}
		queries[i] = make([]float32, s.Dim)
		for j := range queries[i] {
			queries[i][j] = rng.Float32() * 255
		}
	}
	run := func(ahead int) float64 { // ns per shortlist over 5 passes
		prefetchAhead = ahead
		var total int64
		for pass := 0; pass < 5; pass++ {
			for i := range labels {
				t0 := nanotime()
				if _, err := s.Rescore(queries[i], labels[i], 10, false, nil); err != nil {
					b.Fatal(err)
				}
				total += nanotime() - t0
			}
		}
		return float64(total) / (5 * nq)
	}
	defer func(v int) { prefetchAhead = v }(prefetchAhead)
	run(0) // warm the page cache and the mapping
	for _, ahead := range []int{0, 4, 8, 16} {
		b.Run("ahead="+strconv.Itoa(ahead), func(b *testing.B) {
			var ns float64
			for b.Loop() {
				ns = run(ahead)
			}
			b.ReportMetric(ns/1e3, "us/shortlist")
		})
	}
}

func nanotime() int64 { return time.Now().UnixNano() }
