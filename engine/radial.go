package engine

import (
	"cmp"
	"math"
	"slices"

	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// DefaultMaxRadialResults caps the hits of one radial query, as OpenSearch
// k-NN's index.knn.max_radial_search_results does (its default, 10000): the
// first that many of FAISS's list (the order the walk evaluated them) are
// kept, then sorted, and the answer says it was truncated. Request.MaxResults
// may set another cap up to hnswsearch.MaxRangeResults.
const DefaultMaxRadialResults = 10000

// radialPlan is a radial query's checked parameters.
type radialPlan struct {
	p hnswsearch.RangeParams // the FAISS radius, efSearch, filter, cap
	// oversample is the rerank factor of an index with rerank vectors
	// (mode on_disk's guide walk, or rescoring): see queryRadialRerank.
	oversample float64
}

// isRadial reports whether r asks for a radial query.
func (r *Request) isRadial() bool {
	return r.MaxDistance != nil || r.MinScore != nil || r.Radius != nil
}

// planRadial fits a radial request (Request.MaxDistance, MinScore or
// Radius instead of K; checked by Request.Check) to the index: the
// distance or score becomes FAISS's radius for the index's space.
func (x *Index) planRadial(r Request, qp *QueryPlan) error {
	maxRes := r.MaxResults
	if maxRes == 0 {
		maxRes = DefaultMaxRadialResults
	}
	if r.Rescore != nil {
		return badRequest("rescore does not apply to radial queries (an index with rerank vectors checks the radius on exact distances)")
	}
	var radius float32
	var err error
	switch {
	case r.Radius != nil:
		radius = *r.Radius
	case r.MaxDistance != nil:
		radius, err = DistanceRadius(x.space, *r.MaxDistance)
	default:
		radius, err = ScoreRadius(x.space, *r.MinScore)
	}
	if err != nil {
		return err
	}
	rp := &radialPlan{p: hnswsearch.RangeParams{Radius: radius, EfSearch: r.EfSearch, Filter: r.Filter, MaxResults: maxRes}}
	if !r.EfSearchSet {
		rp.p.EfSearch = 0
	}
	if x.rer != nil && !x.Binary() {
		if x.spec.Rerank != nil {
			rp.oversample = x.spec.Rerank.Oversample
		}
		if rp.oversample <= 0 {
			rp.oversample = rerank.DefaultOversample(x.RerankDim())
		}
	}
	qp.radial = rp
	qp.k = maxRes
	ef := x.idx.EfSearch()
	if r.EfSearchSet {
		ef = r.EfSearch
	}
	qp.work = int64(max(maxRes, ef)) // the cap counts as k
	qp.effort = int64(ef)
	return nil
}

// finite32 reports whether v is finite as a float32 (what FAISS gets).
func finite32(v float64) bool {
	return !math.IsNaN(v) && math.Abs(v) <= math.MaxFloat32
}

// DistanceRadius translates OpenSearch's max_distance in space to FAISS's
// range-search radius, as OpenSearch k-NN's FAISS engine does: l2 and
// hamming take it as is (squared L2, Hamming distance; results have
// distance < radius); innerproduct reads it as FAISS's distance −(inner
// product), so the radius is −max_distance (results have inner product >
// radius); cosinesimil reads it as 1 − cosine, so the radius is
// 1 − max_distance. It must be a finite float32, ≥ 0 except for
// innerproduct.
func DistanceRadius(space string, d float64) (float32, error) {
	if !finite32(d) {
		return 0, badRequest("max_distance %v is not a finite float32", d)
	}
	if d < 0 && space != "innerproduct" {
		return 0, badRequest("max_distance %v is negative; space type %s needs a distance ≥ 0", d, space)
	}
	f := float32(d)
	switch space {
	case "innerproduct":
		return -f, nil
	case "cosinesimil":
		return 1 - f, nil
	}
	return f, nil
}

// ScoreRadius translates OpenSearch's min_score in space to FAISS's
// radius, in float32 arithmetic as OpenSearch k-NN computes it: inverting
// Score, l2 and hamming (score 1/(1+d)) give 1/s − 1; innerproduct gives
// s − 1 above 1 and 1 − 1/s up to 1 (the inner product whose score is s);
// cosinesimil (score (1+cos)/2) gives 2s − 1. FAISS's comparison is strict,
// so a hit scoring exactly s is not returned. s must be > 0 and finite,
// and at most 1 except for innerproduct.
func ScoreRadius(space string, s float64) (float32, error) {
	if !finite32(s) || s <= 0 {
		return 0, badRequest("min_score %v must be a finite number > 0", s)
	}
	if s > 1 && space != "innerproduct" {
		return 0, badRequest("min_score %v is above 1; space type %s scores in (0, 1]", s, space)
	}
	f := float32(s)
	switch space {
	case "innerproduct":
		if f > 1 {
			return f - 1, nil
		}
		return 1 - 1/f, nil
	case "cosinesimil":
		return 2*f - 1, nil
	}
	return 1/f - 1, nil
}

// searchRadial is Search for a radial plan: the hits in FAISS's order
// (best first when reranked), unsorted and unscored.
func (x *Index) searchRadial(qp *QueryPlan, q Query, sc *Scratch) ([]Result, Profile, error) {
	var prof Profile
	rp := qp.radial
	res := sc.res[:0]
	defer func() { sc.res = res[:0] }()
	var st hnswsearch.RangeStats
	var err error
	p := rp.p
	p.Deadline = qp.p.Deadline
	p.Ctx = qp.p.Ctx
	switch {
	case rp.oversample > 0:
		res, st, err = x.queryRadialRerank(p, rp.oversample, q.Vector, res, &prof)
	case x.idx.Binary():
		res, st, err = x.idx.RangeSearchBinary(q.Code, p, res)
	default:
		res, st, err = x.idx.RangeSearch(q.Vector, p, res)
	}
	prof.Stats, prof.Truncated = st.Stats, st.Truncated
	return res, prof, err
}

// sortByScore orders a radial query's hits as OpenSearch returns them:
// score descending, ties by id ascending, scores compared as float32 as
// OpenSearch holds them.
func sortByScore(hits []Hit) {
	slices.SortFunc(hits, func(a, b Hit) int {
		if c := cmp.Compare(float32(b.Score), float32(a.Score)); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// queryRadialRerank is a radial query on an index with rerank vectors
// (mode on_disk walks a guide's estimates; others a quantized storage's):
// the walk keeps every node it evaluates (radius unbounded, up to
// hnswsearch.MaxRangeResults); n of them are inside the radius by the walk's
// own distances; the rerank.ShortlistSize(n, oversample) best of them by
// those distances — k-NN's shortlist rule with n in k's place — get exact
// distances; the hits are those strictly inside the radius by the exact
// distance. Past the cap the best-scored are kept (the evaluation order is
// not kept through the rerank).
func (x *Index) queryRadialRerank(p hnswsearch.RangeParams, oversample float64, q []float32, res []hnswsearch.Result, prof *Profile) ([]hnswsearch.Result, hnswsearch.RangeStats, error) {
	ip := x.rerankIP()
	radius, limit := p.Radius, p.MaxResults
	p.Radius, p.MaxResults = float32(math.Inf(1)), hnswsearch.MaxRangeResults
	if ip {
		p.Radius = float32(math.Inf(-1))
	}
	inside := func(d float32) bool {
		if ip {
			return d > radius
		}
		return d < radius
	}
	res, st, err := x.idx.RangeSearch(q, p, res)
	if err != nil {
		return res, st, err
	}
	n := 0
	for _, r := range res {
		if inside(r.Distance) {
			n++
		}
	}
	short := min(len(res), rerank.ShortlistSize(n, oversample))
	if short < n {
		// More nodes were inside the radius by the walk's distances than
		// the shortlist can rerank (rerank.MaxShortlist): the hits may miss
		// some, which the answer must say.
		st.Truncated = true
	}
	slices.SortFunc(res, func(a, b hnswsearch.Result) int {
		c := cmp.Compare(a.Distance, b.Distance)
		if ip {
			c = -c
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a.Label, b.Label)
	})
	var fs rerank.FetchStats
	res, err = x.rescore(p.Ctx, q, res[:short], short, nil, &fs)
	prof.Rerank = &fs
	if err != nil {
		return res, st, err
	}
	out := res[:0]
	for _, r := range res { // best first: the cap keeps the best
		if inside(r.Distance) {
			if len(out) == limit {
				st.Truncated = true
				break
			}
			out = append(out, r)
		}
	}
	return out, st, nil
}
