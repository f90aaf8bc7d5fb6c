package hnswsearch

import (
	"os"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

func BenchmarkProfile(b *testing.B) {
	ds := os.Getenv("DS")
	s, _ := partial.Open("../bench-data/"+ds+".faiss", partial.Options{Backend: os.Getenv("BACKEND"), CacheBytes: 1 << 30})
	f, _ := faissfmt.Open(s, s.Size())
	x, _ := New(f, s, Options{})
	m, _ := vecio.ReadFile("../bench-data/" + ds + ".queries.fvecs")
	dst := make([]Result, 0, 10)
	i := 0
	for b.Loop() {
		dst, _, _ = x.Search(m.RowF32(i%m.N), Params{K: 10, EfSearch: 64}, dst[:0])
		i++
	}
}
