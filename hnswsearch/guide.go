package hnswsearch

import "fmt"

// Guide is a compressed copy of an index's vectors held in memory (loading
// mode on_disk): with Options.Guide the search walks the unchanged graph on
// the guide's estimated distances and reads no vector, and the caller
// reranks the result list with exact distances.
type Guide interface {
	// Shape is the number of vectors and their dimension, which must be
	// the index's.
	Shape() (n int64, d int)
	// NewQuery returns per-query state; the search keeps one per scratch
	// and uses it from one goroutine at a time. avx512 is the index's
	// kernel choice (!Options.NoAVX512) for the estimates' kernels.
	NewQuery(avx512 bool) GuideQuery
}

// GuideQuery estimates distances from one query to the guide's vectors, in
// the search's convention (smaller is nearer: squared L2, or −inner
// product), allocating nothing.
type GuideQuery interface {
	// Reset prepares the query vector q (len d).
	Reset(q []float32) error
	// Dist is the estimated distance to vector v.
	Dist(v int32) float32
	// DistBatch writes the estimated distances to ids into out[:len(ids)].
	DistBatch(ids []int32, out []float32)
}

// checkGuide checks g against the index: float vectors, same shape.
func (x *Index) checkGuide(g Guide) error {
	if x.binary {
		return fmt.Errorf("%w: a guide serves float indexes; this one is binary", ErrBadOption)
	}
	if x.kind != flatL2 && x.kind != flatIP {
		return fmt.Errorf("%w: a guide serves indexes with float (flat) storage", ErrBadOption)
	}
	if n, d := g.Shape(); n != int64(x.n) || d != x.d {
		return fmt.Errorf("%w: the guide holds %d vectors of dimension %d; the index %d of dimension %d", ErrBadOption, n, d, x.n, x.d)
	}
	return nil
}

// guideVectors computes the search's distances on the guide (s.gq).
type guideVectors struct{}

func (guideVectors) dist(s *scratch, v int32) (float32, error) {
	s.st.NDis++
	s.st.GuideDistances++
	return s.gq.Dist(v), nil
}

func (guideVectors) dists(s *scratch, _ int, cand []int32, out []float32) error {
	s.st.NDis += len(cand)
	s.st.GuideDistances += len(cand)
	s.gq.DistBatch(cand, out[:len(cand)])
	return nil
}

func (guideVectors) prefetch([]byte) {}
