package hnswsearch

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// MaxRangeResults bounds the results one range search returns (and the
// memory it holds for them): the walk stops at the first result past
// RangeParams.MaxResults, which is at most this, and says so in
// RangeStats.Truncated.
const MaxRangeResults = 100000

// RangeParams are one range query's parameters (docs/hnsw-search.md §12).
type RangeParams struct {
	// Radius in FAISS's terms: a squared L2 distance (results have
	// distance < Radius), a raw inner product (results have inner product
	// > Radius), or a Hamming distance (< Radius). ±Inf is allowed (+Inf
	// keeps every node the walk evaluates on L2 and Hamming, −Inf on IP);
	// NaN is not.
	Radius float32
	// EfSearch > 0 is SearchParametersHNSW.efSearch; 0 the index's
	// (Options.IndexEfSearch or the stored one). With a Filter on an index
	// inside an id map (IndexIDMap), FAISS drops the parameters and the
	// index's efSearch is used whatever EfSearch says.
	EfSearch int
	// Filter, when not nil, allows only these external ids (IDSelector
	// semantics: other nodes are walked but never returned).
	Filter []int64
	// MaxResults caps the results (0: MaxRangeResults, at most that).
	MaxResults int
	// Deadline, when not zero, ends a search still running then with
	// ErrDeadline.
	Deadline time.Time
	// Ctx is the query's context, as Params.Ctx.
	Ctx context.Context
}

// RangeStats is a range query's Stats, and whether MaxResults cut its list.
type RangeStats struct {
	Stats
	// Truncated: more nodes than MaxResults qualified; the results are the
	// first MaxResults in FAISS's order and the walk stopped there.
	Truncated bool `json:"truncated"`
}

// Validate checks p's sizes and radius.
func (p RangeParams) Validate() error {
	switch {
	case math.IsNaN(float64(p.Radius)):
		return fmt.Errorf("%w: radius is NaN", ErrBadQuery)
	case p.EfSearch < 0 || p.EfSearch > MaxEfSearch:
		return fmt.Errorf("%w: ef_search=%d is out of range [1, %d] (0: the index's)", ErrBadQuery, p.EfSearch, MaxEfSearch)
	case p.MaxResults < 0 || p.MaxResults > MaxRangeResults:
		return fmt.Errorf("%w: max results %d is out of range [1, %d] (0: %d)", ErrBadQuery, p.MaxResults, MaxRangeResults, MaxRangeResults)
	}
	return nil
}

// RangeSearch returns the nodes within p.Radius of q (len Dim()) that the
// walk evaluates, appended to dst in FAISS's order: the order they were
// first evaluated, unsorted (docs/hnsw-search.md §12). Distances are
// FAISS's: squared L2, or the raw inner product on IP indexes. Binary
// indexes take RangeSearchBinary. With dst's capacity large enough the
// search allocates nothing.
func (x *Index) RangeSearch(q []float32, p RangeParams, dst []Result) ([]Result, RangeStats, error) {
	s, err := x.floatQuery(q)
	if err != nil {
		return dst, RangeStats{}, err
	}
	return x.guardedRange(s, p, dst)
}

// RangeSearchBinary is RangeSearch for binary indexes: q is a code of
// Dim() bytes and the radius a Hamming distance.
func (x *Index) RangeSearchBinary(q []byte, p RangeParams, dst []Result) ([]Result, RangeStats, error) {
	s, err := x.binaryQuery(q)
	if err != nil {
		return dst, RangeStats{}, err
	}
	return x.guardedRange(s, p, dst)
}

// guardedRange is guarded (filecheck.go) for range queries: a fault on a
// mapping or a file changed under the query is an error, not a crash.
func (x *Index) guardedRange(s *scratch, p RangeParams, dst []Result) ([]Result, RangeStats, error) {
	return guard(x, s, dst, func(dst []Result) ([]Result, RangeStats, error) { return x.runRange(s, p, dst) })
}

// ip reports whether the index's distances are negated inner products.
func (x *Index) ip() bool { return x.kind == flatIP || x.kind == sqIP || x.kind == sqIntIP }

func (x *Index) runRange(s *scratch, p RangeParams, dst []Result) ([]Result, RangeStats, error) {
	if err := p.Validate(); err != nil {
		return dst, RangeStats{}, err
	}
	if x.closed.Load() {
		return dst, RangeStats{}, fmt.Errorf("index is closed")
	}
	s.st = Stats{}
	s.deadline = 0
	if !p.Deadline.IsZero() {
		s.deadline = p.Deadline.UnixNano()
	}
	s.ctx = queryContext(p.Ctx)
	s.sel = nil
	s.pairs = s.pairs[:0]
	if x.blocks != nil {
		e := x.blocks.EnterRead()
		defer x.blocks.ExitRead(e)
	}
	var truncated bool
	var err error
	if x.n > 0 && x.h.EntryPoint >= 0 {
		if p.Filter != nil {
			_, err = x.setFilter(s, p.Filter)
		}
		if err == nil {
			truncated, err = x.rangeGraph(s, p)
		}
	}
	if x.blocks != nil {
		x.blocks.Account(&s.st.IO)
	}
	if err != nil {
		return dst, RangeStats{Stats: s.st}, err
	}
	ip := x.ip()
	for _, pr := range s.pairs {
		d := pr.d
		if ip {
			d = -d // the search's −inner product back to FAISS's similarity
		}
		id, err := x.externalID(s, pr.id)
		if err != nil {
			return dst, RangeStats{Stats: s.st}, err
		}
		dst = append(dst, Result{ID: id, Distance: d, Label: pr.id})
	}
	return dst, RangeStats{Stats: s.st, Truncated: truncated}, nil
}

// rangeGraph is FAISS 1.15's IndexHNSW::range_search for one query
// (docs/hnsw-search.md §12): the greedy descent, then level 0 with a pool
// of max(ef, 1), every evaluated node strictly inside the radius kept in
// s.pairs in evaluation order. It reports whether the cap cut the list.
func (x *Index) rangeGraph(s *scratch, p RangeParams) (bool, error) {
	h := x.h
	ef := int(x.efSearch)
	// IndexIDMap::range_search with a selector replaces the caller's
	// SearchParametersHNSW by plain parameters carrying the translated
	// selector: the inner index's own efSearch applies.
	if p.EfSearch > 0 && (p.Filter == nil || x.idMap == nil) {
		ef = p.EfSearch
	}
	limit := p.MaxResults
	if limit == 0 {
		limit = MaxRangeResults
	}
	// The search's distances are −inner products on IP indexes: ip > r is
	// −ip < −r (negation is exact).
	t := p.Radius
	if x.ip() {
		t = -t
	}
	nearest := h.EntryPoint
	dn, err := x.vecs.dist(s, nearest)
	if err != nil {
		return false, err
	}
	for l := int(h.MaxLevel); l >= 1; l-- {
		if nearest, dn, err = x.greedy(s, nearest, dn, l); err != nil {
			return false, err
		}
	}
	c := &s.pool
	c.reset(max(ef, 1), true)
	c.push(nearest, dn)
	s.advance()
	// keep appends v when it qualifies; false when the cap is passed.
	keep := func(v int32, d float32) bool {
		if d < t && s.allows(v) {
			if len(s.pairs) == limit {
				return false
			}
			s.pairs = append(s.pairs, pair{d, v})
		}
		return true
	}
	s.visit(nearest)
	if !keep(nearest, dn) {
		return true, nil
	}
	ndis := 0
	defer func() {
		s.st.NDisLevel0 += ndis
		s.st.PoolCapacity = c.n
	}()
	for c.size() > 0 {
		if s.st.Expanded%deadlineEvery == 0 && s.pastDeadline() {
			return false, ErrDeadline
		}
		v0, d0, next := c.popMin()
		if v0 < 0 {
			break
		}
		if c.atLeastBelow(d0, ef) {
			break
		}
		if next >= 0 {
			x.lists.prefetch(next, 0)
		}
		list, err := x.lists.get(s, v0, 0)
		if err != nil {
			return false, err
		}
		s.cand = s.cand[:0]
		for j := 0; j+4 <= len(list); j += 4 {
			v1 := int32(binary.LittleEndian.Uint32(list[j:]))
			if v1 < 0 {
				break
			}
			if err := x.checkNeighbor(v0, 0, v1); err != nil {
				return false, err
			}
			if !s.visit(v1) {
				s.cand = append(s.cand, v1)
			}
		}
		dis := s.cdis[:len(s.cand)]
		if err := x.vecs.dists(s, 0, s.cand, dis); err != nil {
			return false, err
		}
		ndis += len(s.cand)
		for i, v1 := range s.cand {
			if !keep(v1, dis[i]) {
				return true, nil
			}
			c.push(v1, dis[i])
		}
		s.st.Expanded++
	}
	s.st.PoolEmptied = c.size() == 0
	return false, nil
}
