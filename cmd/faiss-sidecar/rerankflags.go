package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// rerankFlags: --rerank-vectors FILE [--oversample F] [--rerank-strategy S].
type rerankFlags struct {
	vectors, strategy, metric, queries string
	oversample                         float64
}

func (f *rerankFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.vectors, "rerank-vectors", "", "rescore a shortlist with full-precision vectors from this .vec, .fvecs or FAISS flat file (by label)")
	fs.Float64Var(&f.oversample, "oversample", 0, "shortlist = min(10000, max(100, ⌈k·oversample⌉)); 0: 3.0 below 768 dims, 2.0 from 768, 1.0 from 1000")
	fs.StringVar(&f.strategy, "rerank-strategy", "direct", "how vectors are read: "+strings.Join(rerank.Strategies, ", "))
	fs.StringVar(&f.metric, "rerank-metric", "", "distance for rescoring a binary index's shortlist: l2 or ip (float indexes use their own metric)")
	fs.StringVar(&f.queries, "rerank-queries", "", "binary indexes: float queries (same order as --queries) to rescore with")
}

func (f *rerankFlags) open(l *loadedIndex) (*rerank.Store, error) {
	if f.vectors == "" {
		return nil, nil
	}
	if f.oversample < 0 {
		return nil, usagef("--oversample must be positive")
	}
	s, err := rerank.Open(f.vectors, f.strategy)
	if err != nil {
		return nil, err
	}
	if l.idx.Binary() {
		if s.Count != l.idx.NTotal() {
			s.Close()
			return nil, fmt.Errorf("%w: %s holds %d vectors, the index has %d", rerank.ErrVectors, f.vectors, s.Count, l.idx.NTotal())
		}
	} else if err := s.Check(l.idx.Dim(), l.idx.NTotal()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (f *rerankFlags) factor(x *hnswsearch.Index) float64 {
	if f.oversample > 0 {
		return f.oversample
	}
	return rerank.DefaultOversample(x.Dim())
}

// floatQueries returns the float query vectors rescoring uses: the queries
// themselves, or --rerank-queries for a binary index.
func (f *rerankFlags) floatQueries(x *hnswsearch.Index, qs []hnswsearch.Query, dim int) ([][]float32, error) {
	out := make([][]float32, len(qs))
	if !x.Binary() {
		for i, q := range qs {
			out[i] = q.Vector
		}
		return out, nil
	}
	if f.queries == "" {
		return nil, usagef("rescoring a binary index needs --rerank-queries (float vectors, same order as --queries)")
	}
	m, err := vecio.ReadFile(f.queries)
	if err != nil {
		return nil, err
	}
	if m.F32 == nil || m.Dim != dim || m.N != len(qs) {
		return nil, fmt.Errorf("%s: need %d float vectors of dimension %d", f.queries, len(qs), dim)
	}
	for i := range out {
		out[i] = m.RowF32(i)
	}
	return out, nil
}

// apply rescores a shortlist and returns the best k with external ids.
func (f *rerankFlags) apply(s *rerank.Store, x *hnswsearch.Index, q []float32, short []hnswsearch.Result, k int) ([]hnswsearch.Result, error) {
	labels := make([]int32, 0, len(short))
	for _, h := range short {
		if h.Label >= 0 {
			labels = append(labels, h.Label)
		}
	}
	ip := x.Metric() == faissfmt.MetricInnerProduct && !x.Binary() || f.metric == "ip"
	hits, err := s.Rescore(q, labels, k, ip, nil)
	if err != nil {
		return nil, err
	}
	out := make([]hnswsearch.Result, 0, k)
	for _, h := range hits {
		id, err := x.ExternalID(h.Label)
		if err != nil {
			return nil, err
		}
		out = append(out, hnswsearch.Result{ID: id, Distance: h.Distance, Label: h.Label})
	}
	fill := float32(3.4028235e38)
	if ip {
		fill = -fill
	}
	for len(out) < k {
		out = append(out, hnswsearch.Result{ID: -1, Distance: fill, Label: -1})
	}
	return out, nil
}
