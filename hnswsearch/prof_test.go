package hnswsearch

import (
	"os"
	"strconv"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// BenchmarkSearchBenchData searches a data set of bench-data/ (made by
// bench/gen_search_data.py) at k 10 and ef 64 (or $EF), for profiling the
// search core:
//
//	DS=clustered BACKEND=mmap EF=256 go test -run='^$' -bench=SearchBenchData -cpuprofile cpu.out ./hnswsearch
func BenchmarkSearchBenchData(b *testing.B) {
	ds, backend := os.Getenv("DS"), os.Getenv("BACKEND")
	if ds == "" {
		ds = "clustered"
	}
	if backend == "" {
		backend = "mmap"
	}
	s, err := partial.Open("../bench-data/"+ds+".faiss", partial.Options{Backend: backend, CacheBytes: 1 << 30})
	if err != nil {
		b.Skipf("no bench data (%v): run bench/gen_search_data.py", err)
	}
	defer s.Close()
	f, err := faissfmt.Open(s, s.Size())
	if err != nil {
		b.Fatal(err)
	}
	x, err := New(f, s, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	m, err := vecio.ReadFile("../bench-data/" + ds + ".queries.fvecs")
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]Result, 0, 10)
	ef := 64
	if v, err := strconv.Atoi(os.Getenv("EF")); err == nil {
		ef = v
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if dst, _, err = x.Search(m.RowF32(i%m.N), Params{K: 10, EfSearch: ef}, dst[:0]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
