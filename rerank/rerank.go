// Package rerank rescores an HNSW shortlist with full-precision vectors read
// by batched, parallel, block-aligned I/O (see Store for the strategies).
package rerank

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
)

// MaxShortlist is the largest shortlist (OpenSearch's limit).
const MaxShortlist = 10000

// DefaultOversample is OpenSearch's default by dimension: 3.0 below 768
// dimensions, 2.0 from 768, 1.0 from 1000.
func DefaultOversample(dim int) float64 {
	switch {
	case dim >= 1000:
		return 1.0
	case dim >= 768:
		return 2.0
	}
	return 3.0
}

// ShortlistSize is K1 = min(10000, max(100, ⌈k·oversample⌉)).
func ShortlistSize(k int, oversample float64) int {
	return min(MaxShortlist, max(100, int(math.Ceil(float64(k)*oversample))))
}

// Hit is one reranked result: the label (internal id) and the exact
// distance (squared L2, or inner product for IP).
type Hit struct {
	Label    int32
	Distance float32
}

// Rescore computes exact distances (fast kernel) from q to the vectors of
// labels and returns the best k: ascending squared L2, or descending inner
// product when ip; ties go to the smaller label.
func (s *Store) Rescore(q []float32, labels []int32, k int, ip bool, st *FetchStats) ([]Hit, error) {
	if len(q) != s.Dim {
		return nil, fmt.Errorf("rerank: query has %d components, %s holds %d-dimensional vectors", len(q), s.Path, s.Dim)
	}
	vecs := make([]float32, len(labels)*s.Dim)
	if err := s.Fetch(labels, vecs, st); err != nil {
		return nil, err
	}
	hits := make([]Hit, len(labels))
	for i, l := range labels {
		v := vecs[i*s.Dim : (i+1)*s.Dim]
		if ip {
			hits[i] = Hit{l, distance.IPFastF(q, v)}
		} else {
			hits[i] = Hit{l, distance.L2FastF(q, v)}
		}
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		c := cmp.Compare(a.Distance, b.Distance)
		if ip {
			c = -c
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a.Label, b.Label)
	})
	return hits[:min(k, len(hits))], nil
}
