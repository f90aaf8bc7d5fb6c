package hnswsearch

import (
	"github.com/faiss-sidecar/faiss-sidecar/internal/par"
)

// Query is one query of a batch: Vector for float indexes, Code for binary.
type Query struct {
	Vector []float32
	Code   []byte
}

// BatchResult is one query's outcome.
type BatchResult struct {
	Hits  []Result
	Stats Stats
	Err   error
}

// SearchBatch searches qs with p over up to workers goroutines (GOMAXPROCS
// when ≤ 0), filling out[i] for qs[i]; out's Hits slices are reused.
func (x *Index) SearchBatch(qs []Query, p Params, workers int, out []BatchResult) []BatchResult {
	if cap(out) < len(qs) {
		out = append(out[:cap(out)], make([]BatchResult, len(qs)-cap(out))...)
	}
	out = out[:len(qs)]
	par.For(len(qs), workers, func(i int) {
		r := &out[i]
		if qs[i].Code != nil {
			r.Hits, r.Stats, r.Err = x.SearchBinary(qs[i].Code, p, r.Hits[:0])
		} else {
			r.Hits, r.Stats, r.Err = x.Search(qs[i].Vector, p, r.Hits[:0])
		}
	})
	return out
}
