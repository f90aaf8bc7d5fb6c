package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/par"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// DefaultK is the k of a query that does not name one.
const DefaultK = 10

// CheckQuery is the rule every query's k and ef_search are held to: k in
// [1, hnswsearch.MaxK]; ef_search, when given (efSet), in [1, maxEf]
// (maxEf ≤ 0 or above hnswsearch.MaxEfSearch: hnswsearch.MaxEfSearch);
// not given, the index's. Errors match ErrBadRequest.
func CheckQuery(k, ef int, efSet bool, maxEf int) error {
	if maxEf <= 0 || maxEf > hnswsearch.MaxEfSearch {
		maxEf = hnswsearch.MaxEfSearch
	}
	switch {
	case k < 1 || k > hnswsearch.MaxK:
		return badRequest("k=%d is out of range [1, %d]", k, hnswsearch.MaxK)
	case efSet && (ef < 1 || ef > maxEf):
		return badRequest("ef_search=%d is out of range [1, %d]", ef, maxEf)
	}
	return nil
}

// Request is what a query asks for, shared by the queries of one request.
type Request struct {
	// K is the number of hits (front ends give DefaultK when it is absent).
	K int
	// EfSearch, when EfSearchSet, is the query's efSearch, at most
	// MaxEfSearch (0: hnswsearch.MaxEfSearch); else the index's.
	EfSearch    int
	EfSearchSet bool
	MaxEfSearch int
	// Filter, when not nil (even empty), allows only these external ids.
	Filter []int64
	// Rescore, when nil, rescores on an index with rerank vectors at its
	// own oversampling; see Rescore.
	Rescore *Rescore
	// MaxDistance or MinScore, when one is set, make the query radial
	// (radial.go): every hit within the distance, or scoring at least the
	// score, up to MaxResults (0: DefaultMaxRadialResults); K is ignored.
	MaxDistance, MinScore *float64
	MaxResults            int
}

// Rescore overrides an index's rescoring for one request: Oversample > 0
// sets the shortlist's factor, 0 keeps the index's, < 0 skips rescoring.
// Asking for it on an index without rerank vectors is an error.
type Rescore struct {
	Oversample float64
}

// QueryPlan is a request's checked parameters on one index.
type QueryPlan struct {
	p       hnswsearch.Params // p.K is the shortlist when rescoring
	k       int               // hits returned
	rescore bool
	work    int64
	effort  int64
	radial  *radialPlan // a radial query's plan, else nil
}

// Work is what one query of the plan may hold: max(k or shortlist,
// ef_search), the figure request limits multiply by the query count.
func (qp *QueryPlan) Work() int64 { return qp.work }

// Effort is the size of one query's walk and rerank, what its time grows
// with: max(k or shortlist, ef_search) for k-NN; ef_search for a radial
// query, whose cap bounds the hits it may return, not the walk.
func (qp *QueryPlan) Effort() int64 { return qp.effort }

// K is the number of hits a query returns at most (a radial query's cap).
func (qp *QueryPlan) K() int { return qp.k }

// Radial reports whether the plan's queries are radial.
func (qp *QueryPlan) Radial() bool { return qp.radial != nil }

// SetDeadline ends queries still running at t with hnswsearch.ErrDeadline.
func (qp *QueryPlan) SetDeadline(t time.Time) { qp.p.Deadline = t }

// SetContext makes ctx the queries' context: reads that can wait (an
// object store) give up when it ends, and a query whose reads gave up at
// ctx's deadline ends with hnswsearch.ErrDeadline. ctx should carry the
// deadline of SetDeadline.
func (qp *QueryPlan) SetContext(ctx context.Context) { qp.p.Ctx = ctx }

// Plan checks r against x before anything is sized by it.
func (x *Index) Plan(r Request) (QueryPlan, error) {
	var qp QueryPlan
	if r.isRadial() {
		if err := CheckQuery(1, r.EfSearch, r.EfSearchSet, r.MaxEfSearch); err != nil {
			return qp, err
		}
		return qp, x.planRadial(r, &qp)
	}
	if err := CheckQuery(r.K, r.EfSearch, r.EfSearchSet, r.MaxEfSearch); err != nil {
		return qp, err
	}
	qp.k, qp.p.K = r.K, r.K
	ef := x.idx.EfSearch()
	if r.EfSearchSet {
		qp.p.EfSearch, ef = r.EfSearch, r.EfSearch
	}
	qp.p.Filter = r.Filter
	if r.Rescore != nil && x.rer == nil {
		return qp, badRequest("rescore needs an index loaded with rerank.vectors_path")
	}
	if r.Rescore != nil && x.Binary() {
		return qp, badRequest("rescoring a binary index needs float queries; a request's vector is the binary code")
	}
	// A binary index's code is not a float query: its shortlist cannot be
	// rescored here (the CLI takes float queries with --rerank-queries).
	qp.rescore = x.rer != nil && !x.Binary() && (r.Rescore == nil || r.Rescore.Oversample >= 0)
	if qp.rescore {
		var f float64
		if r.Rescore != nil {
			f = r.Rescore.Oversample
		}
		qp.p.K = x.ShortlistSize(qp.k, f)
	}
	if err := qp.p.Validate(); err != nil {
		return qp, err
	}
	qp.work = int64(max(qp.p.K, ef))
	qp.effort = qp.work
	return qp, nil
}

// ShortlistSize is how many candidates a rescored query of k hits searches
// for: oversample > 0 overrides the index's factor, which defaults by the
// rerank vectors' dimension.
func (x *Index) ShortlistSize(k int, oversample float64) int {
	f := oversample
	if f <= 0 && x.spec.Rerank != nil {
		f = x.spec.Rerank.Oversample
	}
	if f <= 0 {
		f = rerank.DefaultOversample(x.RerankDim())
	}
	return rerank.ShortlistSize(k, f)
}

// Hit is one scored search result.
type Hit struct {
	ID       int64   `json:"id"`
	Distance float64 `json:"distance"`
	Score    float64 `json:"score"`
}

// Profile is a query's search statistics and I/O.
type Profile struct {
	hnswsearch.Stats
	Rerank *rerank.FetchStats `json:"rerank,omitempty"`
	Micros float64            `json:"search_us"`
	// Truncated: a radial query's cap cut its hits.
	Truncated bool `json:"truncated,omitempty"`
}

// Scratch is one query's buffers, reused across queries by one goroutine
// at a time; a nil Scratch makes the query allocate its own.
type Scratch struct {
	q      []float32
	qb     []byte
	res    []hnswsearch.Result
	hits   []Hit
	labels []int32
	rh     []rerank.Hit
	fs     rerank.FetchStats // the profile's rerank reads
}

// grow returns b[:n], reallocated only when its capacity is short; n has
// been checked by the caller.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// Query runs one query of plan qp: vec is the query's values (float
// components, or bytes 0–255 for a binary index). It converts and checks
// the vector (normalised for cosinesimil), searches, rescores when planned,
// maps labels to external ids and scores each hit by the space type; hits
// are the real ones only (no −1 fills). With sc the hits, and the
// profile's rerank reads, live in sc until it is reused.
func (x *Index) Query(qp *QueryPlan, vec []float64, sc *Scratch) ([]Hit, Profile, error) {
	if sc == nil {
		sc = new(Scratch)
	}
	var prof Profile
	want := x.idx.Dim() // components, or bytes (0–255) for a binary index
	if len(vec) == 0 {
		return nil, prof, badRequest("vector is required: index %s expects %d values", x.spec.Label, want)
	}
	if len(vec) != want {
		return nil, prof, badRequest("vector has %d values, index %s expects %d", len(vec), x.spec.Label, want)
	}
	var q []float32
	var qb []byte
	if x.idx.Binary() {
		qb = grow(sc.qb, want)
		sc.qb = qb
		for j, v := range vec {
			if v != math.Trunc(v) || v < 0 || v > 255 {
				return nil, prof, badRequest("binary vector value %d is %v; bytes 0–255 expected", j, v)
			}
			qb[j] = byte(v)
		}
	} else {
		q = grow(sc.q, want)
		sc.q = q
		var norm float64
		for j, v := range vec {
			f := float32(v) // rounds to nearest: 3.4028235e38 is float32's largest
			if math.IsNaN(v) || math.IsInf(float64(f), 0) {
				return nil, prof, badRequest("vector value %d (%v) is not a finite float32", j, v)
			}
			q[j] = f
			norm += float64(f) * float64(f) // the float32 query's norm: 1e-46 is 0
		}
		if norm > math.MaxFloat32 && x.space != "cosinesimil" { // distances would overflow to ±Inf or NaN
			return nil, prof, badRequest("vector's squared norm %.3g is beyond float32's range (%.3g): distances to it would overflow", norm, math.MaxFloat32)
		}
		if x.space == "cosinesimil" { // OpenSearch normalises queries for cosine
			if norm == 0 {
				return nil, prof, badRequest("a zero vector has no cosine similarity")
			}
			inv := 1 / math.Sqrt(norm)
			for j := range q {
				q[j] = float32(float64(q[j]) * inv)
			}
		}
	}
	t0 := time.Now()
	if qp.radial != nil {
		return x.queryRadial(qp, hnswsearch.Query{Vector: q, Code: qb}, sc, t0)
	}
	res := grow(sc.res, qp.p.K)[:0] // the search appends no more
	defer func() { sc.res = res[:0] }()
	var err error
	res, prof.Stats, err = x.Search(hnswsearch.Query{Vector: q, Code: qb}, qp.p, res)
	if err != nil {
		return nil, prof, err
	}
	if qp.rescore && !x.idx.Binary() { // a binary index's float query is not in the request
		sc.fs = rerank.FetchStats{}
		if res, err = x.rescore(qp.p.Ctx, q, res, qp.k, sc, &sc.fs); err != nil {
			return nil, prof, err
		}
		prof.Rerank = &sc.fs
	}
	prof.Micros = float64(time.Since(t0).Nanoseconds()) / 1e3
	hits := grow(sc.hits, len(res))[:0]
	defer func() { sc.hits = hits[:0] }()
	for _, r := range res {
		if r.ID < 0 {
			continue // OpenSearch returns only real hits
		}
		hits = append(hits, Hit{ID: r.ID, Distance: float64(r.Distance), Score: Score(x.space, r.Distance)})
	}
	if err := checkFinite(hits); err != nil {
		return nil, prof, err
	}
	return hits, prof, nil
}

// checkFinite refuses an answer holding a distance that is not a finite
// number (JSON has no spelling for one, nor for the score made from it): a
// query within float32's range whose products with the index's vectors
// still overflow. A finite float32 distance gives a finite score.
func checkFinite(hits []Hit) error {
	for _, h := range hits {
		if math.IsNaN(h.Distance) || math.IsInf(h.Distance, 0) {
			return badRequest("the distance to id %d is %v: the vector's values overflow float32 with this index's vectors", h.ID, h.Distance)
		}
	}
	return nil
}

// rerankIP reports whether rescoring ranks by inner product: a float
// index's own metric, the rerank metric for a binary one.
func (x *Index) rerankIP() bool {
	if x.idx.Binary() {
		return x.spec.Rerank != nil && x.spec.Rerank.Metric == "ip"
	}
	return x.idx.Metric() == faissfmt.MetricInnerProduct
}

// Rescore computes full-precision distances from q (float) to the
// shortlist's vectors and returns the best k, with external ids, in
// short's array (the shortlist is consumed). sc (may be nil) holds the
// labels; fs (may be nil) gets the reads.
func (x *Index) Rescore(q []float32, short []hnswsearch.Result, k int, sc *Scratch, fs *rerank.FetchStats) ([]hnswsearch.Result, error) {
	return x.rescore(nil, q, short, k, sc, fs)
}

// rescore is Rescore whose reads give up when ctx ends (nil: never); one
// given up at ctx's deadline ends the query with hnswsearch.ErrDeadline,
// as the search's own reads do.
func (x *Index) rescore(ctx context.Context, q []float32, short []hnswsearch.Result, k int, sc *Scratch, fs *rerank.FetchStats) ([]hnswsearch.Result, error) {
	var labels []int32
	var rh []rerank.Hit
	if sc != nil {
		labels, rh = sc.labels[:0], sc.rh
	} else {
		labels = make([]int32, 0, len(short))
	}
	for _, r := range short {
		if r.Label >= 0 {
			labels = append(labels, r.Label)
		}
	}
	rh, err := x.rer.RescoreToContext(ctx, rh, q, labels, k, x.rerankIP(), fs)
	if err != nil {
		if ctx != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", hnswsearch.ErrDeadline, err)
		}
		return nil, err
	}
	if sc != nil {
		sc.labels, sc.rh = labels[:0], rh[:0]
	}
	out := short[:0]
	for _, r := range rh {
		id, err := x.idx.ExternalID(ctx, r.Label)
		if err != nil {
			return nil, err
		}
		out = append(out, hnswsearch.Result{ID: id, Distance: r.Distance, Label: r.Label})
	}
	return out, nil
}

// FillFAISS pads rescored results to k as FAISS fills a short result: id
// and label −1, the worst distance of the rescoring metric.
func (x *Index) FillFAISS(res []hnswsearch.Result, k int) []hnswsearch.Result {
	fill := float32(math.MaxFloat32)
	if x.rerankIP() {
		fill = -fill
	}
	for len(res) < k {
		res = append(res, hnswsearch.Result{ID: -1, Distance: fill, Label: -1})
	}
	return res
}

// Score is OpenSearch's translation of a distance to a score in space.
func Score(space string, d float32) float64 {
	v := float64(d)
	switch space {
	case "innerproduct":
		if v <= 0 {
			return 1 / (1 - v)
		}
		return v + 1
	case "cosinesimil":
		return math.Max((1+v)/2, 0)
	}
	return 1 / (1 + v) // l2, hamming
}

// FAISSRequest is a query in the CLI's terms, answered in FAISS's shape.
type FAISSRequest struct {
	// K rows per query; EfSearch the query's efSearch (0: the index's).
	K, EfSearch int
	// Filter, when not nil (even empty), allows only these external ids.
	Filter []int64
	// Oversample > 0 overrides the index's shortlist factor when it
	// rescores (ShortlistSize).
	Oversample float64
}

// SearchFAISS runs one query and returns K rows in FAISS's order with
// external ids: the search's own (−1 fills), or, on an index with rerank
// vectors, its shortlist rescored with rq and filled as FAISS fills
// (FillFAISS). rq is the float query that rescores: nil takes q.Vector; a
// binary index's rescoring needs it. With sc the rows live in sc until it
// is reused, and a query allocates nothing; fs, when not nil, receives the
// rescoring's reads.
func (x *Index) SearchFAISS(q hnswsearch.Query, rq []float32, r FAISSRequest, sc *Scratch, fs *rerank.FetchStats) ([]hnswsearch.Result, hnswsearch.Stats, error) {
	var dst []hnswsearch.Result
	if sc != nil {
		dst = sc.res[:0]
		defer func() { sc.res = dst[:0] }()
	}
	p := hnswsearch.Params{K: r.K, EfSearch: r.EfSearch, Filter: r.Filter}
	if x.rer != nil {
		if rq == nil {
			rq = q.Vector
		}
		if rq == nil {
			return dst[:0], hnswsearch.Stats{}, badRequest("rescoring a binary index needs float queries")
		}
		p.K = x.ShortlistSize(r.K, r.Oversample)
	}
	res, st, err := x.Search(q, p, dst)
	dst = res
	if err != nil || x.rer == nil {
		return res, st, err
	}
	if res, err = x.Rescore(rq, res, r.K, sc, fs); err != nil {
		return nil, st, err
	}
	dst = x.FillFAISS(res, r.K)
	return dst, st, nil
}

// SearchBatchFAISS is SearchFAISS over qs (rqs[i] rescores qs[i]; rqs may
// be nil) with up to workers goroutines (GOMAXPROCS when ≤ 0).
func (x *Index) SearchBatchFAISS(qs []hnswsearch.Query, rqs [][]float32, r FAISSRequest, workers int) []hnswsearch.BatchResult {
	out := make([]hnswsearch.BatchResult, len(qs))
	par.For(len(qs), workers, func(i int) {
		var rq []float32
		if rqs != nil {
			rq = rqs[i]
		}
		o := &out[i]
		o.Hits, o.Stats, o.Err = x.SearchFAISS(qs[i], rq, r, nil, nil)
	})
	return out
}
