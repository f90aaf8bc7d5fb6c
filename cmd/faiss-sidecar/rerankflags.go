package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
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
	fs.Float64Var(&f.oversample, "oversample", 0, "shortlist = min(10000, max(100, ⌈k·oversample⌉)); 0: with --rerank-vectors 3.0 below 768 dims, 2.0 from 768, 1.0 from 1000; on_disk OpenSearch's default for its compression")
	fs.StringVar(&f.strategy, "rerank-strategy", "", "how vectors are read: "+strings.Join(rerank.Strategies, ", ")+" (default "+engine.DefaultRerankStrategy+"; on_disk without a budget: mmap)")
	fs.StringVar(&f.metric, "rerank-metric", "", "distance for rescoring a binary index's shortlist: l2 or ip (float indexes use their own metric)")
	fs.StringVar(&f.queries, "rerank-queries", "", "binary indexes: float queries (.fvecs or float32 .npy, same order as --queries) to rescore with")
}

// addRescoreQueries gives each query of a binary index its float vector
// for rescoring (engine.Query.Rescore) from --rerank-queries; a float
// index rescores with the queries themselves.
func (f *rerankFlags) addRescoreQueries(x *engine.Index, qs []engine.Query) error {
	if !x.Binary() {
		return nil
	}
	if f.queries == "" {
		return usagef("rescoring a binary index needs --rerank-queries (float vectors, same order as --queries)")
	}
	m, err := vecio.Read(f.queries, 0, vecio.FloatQueries)
	if err != nil {
		return err
	}
	if dim := x.RerankDim(); m.F32 == nil || m.Dim != dim || m.N != len(qs) {
		return fmt.Errorf("%s: need %d float vectors of dimension %d", f.queries, len(qs), dim)
	}
	for i := range qs {
		qs[i].Rescore = m.RowF32(i)
	}
	return nil
}
