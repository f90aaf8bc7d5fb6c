package hnswsearch

import (
	"runtime"
	"sync"
	"sync/atomic"
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
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(qs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(qs) {
					return
				}
				r := &out[i]
				if qs[i].Code != nil {
					r.Hits, r.Stats, r.Err = x.SearchBinary(qs[i].Code, p, r.Hits[:0])
				} else {
					r.Hits, r.Stats, r.Err = x.Search(qs[i].Vector, p, r.Hits[:0])
				}
			}
		}()
	}
	wg.Wait()
	return out
}
