package hnswsearch

import (
	"context"
	"errors"
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
)

// ErrBudget marks a memory budget too small to serve an index at all.
var ErrBudget = errors.New("memory budget too small")

// Plan is how one memory budget is spent on an index served in
// memory_efficient mode (the bounded-memory policy):
//
//   - HeapBytes stays with the Go heap: the parsed small arrays, per-query
//     scratch (a visited table of one byte per vector and ~256 KiB of
//     buffers for each worker) and the collector's headroom, twice what is
//     live, plus 4 MiB for the runtime's own structures (less, and the
//     collector runs without pause once the heap nears its limit).
//   - The rest (Options.HeldBytes) is held outside the Go heap, so it needs
//     no headroom: first the neighbor lists, compacted — all of them when
//     they fit in nine tenths of it, else those of the nodes above level 0
//     and the most-linked ones in half of it (a list saves a whole round
//     trip per expansion; a vector saves one read out of a batch) — then the
//     vector cache, which holds exactly each vector's bytes and is filled by
//     queries, by read-ahead of the likely next expansions, and by Warm.
//   - Misses are read in batches: an expanded node's unvisited neighbors'
//     vectors as one parallel batch. On direct I/O no block cache is kept
//     (BlockCacheBytes 0); backends that need one get a small one.
type Plan struct {
	Options         Options
	BlockCacheBytes int64
	HeapBytes       int64
}

// Apply sets the plan's memory options (HeldBytes, BatchReads) in o,
// leaving the others (semantics, kernel) as they are.
func (p Plan) Apply(o *Options) {
	o.HeldBytes, o.BatchReads = p.Options.HeldBytes, p.Options.BatchReads
}

// PlanBudget plans budget bytes for f (a probe's parse: headers and small
// arrays) with up to workers concurrent queries, served with direct I/O
// and no block cache when direct is set (its misses are read in batches
// straight from the device), else through a small block cache. Options
// other than the memory ones (the semantics, the kernel) are left zero for
// the caller to set.
func PlanBudget(f *faissfmt.File, direct bool, budget int64, workers int) (Plan, error) {
	g := f.Graph
	if g == nil {
		return Plan{}, fmt.Errorf("%s index has no HNSW graph", f.Root.FourCC)
	}
	workers = max(workers, 1)
	var p Plan
	p.HeapBytes = heapBytes(f, workers)
	if least := MinBudget(f, workers); budget < least {
		return Plan{}, fmt.Errorf("%w: %d bytes; this index needs at least %d (small arrays, %d workers' scratch, 64 cached vectors)",
			ErrBudget, budget, least, workers)
	}
	off := budget - p.HeapBytes
	if !direct {
		p.BlockCacheBytes = max(1<<20, off/16)
		off -= p.BlockCacheBytes
	}
	p.Options.BatchReads = true
	p.Options.HeldBytes = off
	return p, nil
}

// heapBytes is a plan's Go heap share (Plan.HeapBytes).
func heapBytes(f *faissfmt.File, workers int) int64 {
	return 2*(f.ResidentBytes()+int64(max(workers, 1))*(f.Graph.NTotal+256<<10)) + 4<<20
}

// MinBudget is the smallest budget PlanBudget takes for f (a probe's
// parse, with its graph) and workers: the heap share and the smallest vector
// cache.
func MinBudget(f *faissfmt.File, workers int) int64 {
	return heapBytes(f, workers) + minVectorCache(f.Graph.NTotal, VectorCodeSize(f))
}

// afterIDMap is what held bytes leave once the id map (idLen bytes, −1
// for none) is pinned, and whether it is: when it takes at most a quarter.
func afterIDMap(idLen, held int64) (rest int64, pinned bool) {
	if idLen >= 0 && idLen <= held/4 {
		return held - idLen, true
	}
	return held, false
}

// fitsHeld is whether what pins bytes fits held bytes: in nine tenths.
func fitsHeld(bytes, held int64) bool { return bytes <= held*9/10 }

// PinsAllLists reports whether an Index of f walked on a guide
// (Options.Guide) pins every neighbor list when its Options.HeldBytes is
// held, given est = EstimatePinnedLists(f, …): the rule planHeld applies
// at open, for a caller choosing between guides of different sizes first.
func PinsAllLists(f *faissfmt.File, held, est int64) bool {
	var idLen int64 = -1
	if f.IDMap != nil {
		s, _ := f.IDMap.Section("id_map")
		idLen = s.Len
	}
	held, _ = afterIDMap(idLen, held)
	return fitsHeld(est, held)
}

// minVectorCache is the smallest vector cache worth keeping: its table (4
// bytes a vector) and 64 vectors.
func minVectorCache(n, codeSize int64) int64 { return 4*n + 64*codeSize }

// planHeld splits held bytes (Options.HeldBytes) between what an Index
// pins, as the Plan's comment says: the id map when it takes at most a
// quarter (every result reads it); then lists and vectors whole when both
// fit in nine tenths; else every list, compacted, when they fit there
// (estimated from a sample of nodes); else the hubs' lists in half; and the
// vector cache gets what the lists leave. With a guide (Options.Guide) the
// search reads no vector: every list when they fit, else the hubs', and
// the vector cache that follows holds the vectors the caller reranks
// (VectorRecords); without that cache (Options.NoVectorCache) the hubs'
// lists take all of held, and what every list leaves is spare.
func (x *Index) planHeld(ctx context.Context, held int64, guide, noCache bool) (h holding, idMap bool, err error) {
	var idLen int64 = -1
	if x.idMap != nil {
		idLen = x.idMap.Len
	}
	held, idMap = afterIDMap(idLen, held)
	est, err := x.estimatePinnedAll(ctx)
	if err != nil {
		return h, false, err
	}
	switch {
	case guide: // the walk reads the guide; the rest caches the rerank's vectors, or is spare
		switch {
		case fitsHeld(est, held):
			h.allLists = true
		case noCache:
			h.hubBytes = held
		default:
			h.hubBytes = held / 2
		}
		h.spare = noCache
	case fitsHeld(est+int64(x.n)*int64(x.codeSize), held): // vectors pinned compacted
		h.allLists, h.vectors = true, true
	case fitsHeld(est, held):
		h.allLists = true
	default:
		h.hubBytes = held / 2
	}
	h.restBytes = held
	return h, idMap, nil
}
