package hnswsearch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// BenchmarkFilterThreshold measures where an exact scan of the allowed ids
// beats the filtered graph search (ef 64, k 10), and the graph's recall
// against the exact answer, on bench-data/clustered (bench/gen_search_data.py):
//
//	go test -run='^$' -bench=FilterThreshold ./hnswsearch
func BenchmarkFilterThreshold(b *testing.B) {
	s, err := storage.Open(context.Background(), "../bench-data/clustered.faiss", storage.Options{Backend: "mmap"})
	if err != nil {
		b.Skip("no bench-data/clustered.faiss: run bench/gen_search_data.py")
	}
	defer s.Close()
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	if err != nil {
		b.Fatal(err)
	}
	graph, _ := New(context.Background(), f, s, Options{})
	exact, _ := New(context.Background(), f, s, Options{ExactFilterMax: 1 << 30})
	qs, err := vecio.ReadFile("../bench-data/clustered.queries.fvecs")
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{10, 100, 300, 1000, 3000, 10000, 30000} {
		allowed := make([]int64, n)
		for i := range allowed {
			allowed[i] = r.Int64N(graph.NTotal())
		}
		for _, c := range []struct {
			name string
			x    *Index
		}{{"exact", exact}, {"graph", graph}} {
			b.Run(fmt.Sprintf("allowed=%d/%s", n, c.name), func(b *testing.B) {
				p := Params{K: 10, EfSearch: 64, Filter: allowed}
				dst := make([]Result, 0, 10)
				hits, total, i := 0, 0, 0
				for b.Loop() {
					q := qs.RowF32(i % qs.N)
					dst, _, _ = c.x.Search(q, p, dst[:0])
					if c.name == "graph" && i < 200 {
						want, _, _ := exact.Search(q, p, nil)
						for _, h := range dst {
							for _, w := range want {
								if h.ID >= 0 && h.ID == w.ID {
									hits++
								}
							}
						}
						total += 10
					}
					i++
				}
				if total > 0 {
					b.ReportMetric(float64(hits)/float64(total), "recall-vs-exact")
				}
			})
		}
	}
}
