package hnswsearch

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// BenchmarkBackendsInterleaved compares memory_efficient with full mode in
// one process: full mode (the file copied into memory, vectors on cache
// lines), mmap (warmed: 2 MiB page-cache folios), pread (a 1 GiB block
// cache, warmed) and full mode with the vectors at the file's offsets
// search one data set of bench-data/ at k 10 and ef $EF (default 16) in
// turns of 400 queries, 31 turns each. Separate processes on this shared
// machine move ±20% from run to run; turns a few milliseconds apart see the
// same neighbours. It reports the median of the per-turn speed ratios to
// full mode and logs their quartiles.
//
//	DS=fmnist EF=16 go test -run='^$' -bench=BackendsInterleaved -benchtime 1x ./hnswsearch
func BenchmarkBackendsInterleaved(b *testing.B) {
	ds := os.Getenv("DS")
	if ds == "" {
		ds = "fmnist"
	}
	ef := 16
	if v, err := strconv.Atoi(os.Getenv("EF")); err == nil {
		ef = v
	}
	path := "../bench-data/" + ds + ".faiss"
	probe, err := Probe(path, "pread")
	if err != nil {
		b.Skipf("no bench data (%v): run bench/gen_search_data.py", err)
	}
	align := AlignOffset(probe)
	configs := []struct {
		name string
		o    partial.Options
	}{
		{"full", partial.Options{Backend: "memory", AlignOffset: align}},
		{"mmap", partial.Options{Backend: "mmap"}},
		{"pread", partial.Options{Backend: "pread", CacheBytes: 1 << 30, AlignOffset: align}},
		// Full mode with the vectors where the file has them, as a mapping
		// must: the cost of alignment alone.
		{"full-fileoffsets", partial.Options{Backend: "memory"}},
	}
	idx := make([]*Index, len(configs))
	for i, c := range configs {
		idx[i] = benchIndex(b, path, c.o)
		if err := idx[i].Warm(1 << 30); err != nil {
			b.Fatal(err)
		}
	}
	m := benchQueries(b, ds)
	dst := make([]Result, 0, 10)
	const turn = 400
	qi := 0
	search := func(x *Index) float64 {
		start := time.Now()
		for j := range turn {
			if dst, _, err = x.Search(m.RowF32((qi+j)%m.N), Params{K: 10, EfSearch: ef}, dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start).Microseconds()) / turn
	}
	for _, x := range idx { // untimed: the scratch pools and caches fill
		search(x)
	}
	us := make([][]float64, len(idx))
	for b.Loop() {
		for range 31 {
			for i, x := range idx {
				us[i] = append(us[i], search(x))
			}
			qi += turn
		}
	}
	for i, c := range configs {
		ratios := make([]float64, len(us[i]))
		for t := range ratios {
			ratios[t] = us[0][t] / us[i][t] // speed relative to full mode
		}
		slices.Sort(ratios)
		med := slices.Sorted(slices.Values(us[i]))[len(us[i])/2]
		b.ReportMetric(med, c.name+"-us/query")
		if i > 0 {
			b.ReportMetric(ratios[len(ratios)/2], c.name+"/full")
			b.Logf("%s/full: median %.3f, quartiles %.3f–%.3f over %d turns", c.name,
				ratios[len(ratios)/2], ratios[len(ratios)/4], ratios[3*len(ratios)/4], len(ratios))
		}
	}
}
