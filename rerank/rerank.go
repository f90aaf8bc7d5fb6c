package rerank

import (
	"cmp"
	"context"
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
	return s.RescoreTo(nil, q, labels, k, ip, st)
}

// RescoreTo is Rescore with the hits in dst's array, reallocated only when
// its capacity is under len(labels): a caller reusing dst allocates nothing.
func (s *Store) RescoreTo(dst []Hit, q []float32, labels []int32, k int, ip bool, st *FetchStats) ([]Hit, error) {
	return s.RescoreToContext(nil, dst, q, labels, k, ip, st)
}

// RescoreToContext is RescoreTo whose reads that can block (an object
// store, a device) give up when ctx ends (nil: never), with an error
// wrapping the context's cause.
func (s *Store) RescoreToContext(ctx context.Context, dst []Hit, q []float32, labels []int32, k int, ip bool, st *FetchStats) ([]Hit, error) {
	if len(q) != s.Dim {
		return nil, fmt.Errorf("query has %d components, %s holds %d-dimensional vectors", len(q), s.Path, s.Dim)
	}
	// Distances straight from the read bytes: no decoding pass.
	hits := dst[:0]
	if cap(hits) < len(labels) {
		hits = make([]Hit, len(labels))
	}
	hits = hits[:len(labels)]
	fk := distance.Fast(!s.noAVX512)
	dist := fk.L2
	if ip {
		dist = fk.IP
	}
	err := s.view(ctx, labels, st, func(i int, b []byte) {
		hits[i] = Hit{labels[i], dist(q, b)}
	})
	if err != nil {
		return nil, err
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
