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

// Request is what a query asks for, shared by the queries of one request.
type Request struct {
	// K is the number of hits (front ends give DefaultK when it is absent).
	K int
	// EfSearch, when EfSearchSet, is the query's efSearch, at most
	// MaxEfSearch (0: the package's MaxEfSearch); else the index's.
	EfSearch    int
	EfSearchSet bool
	MaxEfSearch int
	// Filter, when not nil (even empty), allows only these external ids.
	Filter []int64
	// Rescore, when nil, rescores on an index with rerank vectors at its
	// own oversampling; see Rescore.
	Rescore *Rescore
	// RescoreBinary rescores a binary index's shortlist with each query's
	// float vector (Query.Rescore, the command line's --rerank-queries);
	// without it a binary index's shortlist is not rescored, since its
	// query is the code.
	RescoreBinary bool
	// MaxDistance or MinScore, when one is set, make the query radial
	// (radial.go): every hit within the distance, or scoring at least the
	// score, up to MaxResults (0: DefaultMaxRadialResults); K is ignored.
	// Radius is FAISS's own radius instead, whatever the space type
	// (squared L2 < Radius, inner product > Radius, Hamming < Radius).
	MaxDistance, MinScore *float64
	Radius                *float32
	MaxResults            int
}

// Check holds r to the rules that need no index: k in [1, MaxK] (a
// radial query's cap in [1, MaxRangeResults] instead), ef_search, when
// set, in [1, MaxEfSearch or the request's lower limit], one radius at
// most. Plan applies it; a front end may call it first, to refuse a
// request before it opens anything. Errors match ErrBadRequest.
func (r Request) Check() error {
	maxEf := r.MaxEfSearch
	if maxEf <= 0 || maxEf > MaxEfSearch {
		maxEf = MaxEfSearch
	}
	radii := 0
	for _, set := range []bool{r.MaxDistance != nil, r.MinScore != nil, r.Radius != nil} {
		if set {
			radii++
		}
	}
	switch {
	case radii == 0 && (r.K < 1 || r.K > MaxK):
		return badRequest("k=%d is out of range [1, %d]", r.K, MaxK)
	case r.EfSearchSet && (r.EfSearch < 1 || r.EfSearch > maxEf):
		return badRequest("ef_search=%d is out of range [1, %d]", r.EfSearch, maxEf)
	case radii > 1:
		return badRequest("give one of k, max_distance and min_score")
	case radii == 1 && (r.MaxResults < 0 || r.MaxResults > MaxRangeResults):
		return badRequest("max_results=%d is out of range [1, %d]", r.MaxResults, MaxRangeResults)
	case r.Radius != nil && math.IsNaN(float64(*r.Radius)):
		return badRequest("radius is NaN")
	}
	return nil
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

// Shortlist is how many candidates a query's rescoring ranks (0: the plan
// does not rescore).
func (qp *QueryPlan) Shortlist() int {
	if !qp.rescore {
		return 0
	}
	return qp.p.K
}

// Radial reports whether the plan's queries are radial.
func (qp *QueryPlan) Radial() bool { return qp.radial != nil }

// SetDeadline ends queries still running at t with ErrDeadline.
func (qp *QueryPlan) SetDeadline(t time.Time) { qp.p.Deadline = t }

// SetContext makes ctx the queries' context: reads that can wait (an
// object store) give up when it ends, and a query whose reads gave up at
// ctx's deadline ends with ErrDeadline. ctx should carry the deadline of
// SetDeadline.
func (qp *QueryPlan) SetContext(ctx context.Context) { qp.p.Ctx = ctx }

// Plan checks r (Request.Check) and fits it to x before anything is sized
// by it. It is the one check of a request: the queries of the plan check
// only their vectors.
func (x *Index) Plan(r Request) (QueryPlan, error) {
	var qp QueryPlan
	if err := r.Check(); err != nil {
		return qp, err
	}
	if r.isRadial() {
		return qp, x.planRadial(r, &qp)
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
	if r.Rescore != nil && x.Binary() && !r.RescoreBinary {
		return qp, badRequest("rescoring a binary index needs float queries; a request's vector is the binary code")
	}
	qp.rescore = x.rer != nil && (!x.Binary() || r.RescoreBinary) && (r.Rescore == nil || r.Rescore.Oversample >= 0)
	if qp.rescore {
		var f float64
		if r.Rescore != nil {
			f = r.Rescore.Oversample
		}
		qp.p.K = x.ShortlistSize(qp.k, f) // at most rerank.MaxShortlist, which is MaxK
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

// Query is one query as the index compares it: Vector (float32
// components) for a float index, Code (bytes) for a binary one. Rescore
// is the float vector that rescores a binary index's shortlist
// (Request.RescoreBinary); a float index rescores with Vector.
type Query struct {
	Vector  []float32
	Code    []byte
	Rescore []float32
}

// Result is one row of an answer in FAISS's shape: the external id,
// FAISS's distance, and the internal label (−1 for a fill).
type Result = hnswsearch.Result

// Stats is a query's search statistics (Profile's).
type Stats = hnswsearch.Stats

// FetchStats is a rescoring's reads (Profile.Rerank).
type FetchStats = rerank.FetchStats

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

// Search runs one query of plan qp: the one query pipeline, whose answer
// is in FAISS's shape. A k-NN plan's answer is k rows in FAISS's order
// with external ids, −1 fills included; when the plan rescores, the
// shortlist rescored with full-precision vectors and filled to k as FAISS
// fills (id and label −1, the rescoring metric's worst distance). A radial
// plan's answer is every hit in FAISS's order (best first when rescored),
// neither sorted nor scored. The vector is not checked beyond its length
// (Query checks a request's). With sc the rows, and the profile's rerank
// reads, live in sc until it is reused, and a query allocates nothing.
func (x *Index) Search(qp *QueryPlan, q Query, sc *Scratch) ([]Result, Profile, error) {
	if sc == nil {
		sc = new(Scratch)
	}
	var prof Profile
	if qp.radial != nil {
		return x.searchRadial(qp, q, sc)
	}
	var rq []float32 // the float query that rescores
	if qp.rescore {
		if rq = q.Vector; x.idx.Binary() {
			rq = q.Rescore
		}
		if rq == nil {
			return nil, prof, badRequest("rescoring a binary index needs float queries")
		}
	}
	res := grow(sc.res, qp.p.K)[:0] // the search appends no more
	defer func() { sc.res = res[:0] }()
	var err error
	res, prof.Stats, err = x.search(q, qp.p, res)
	if err != nil || !qp.rescore {
		return res, prof, err
	}
	sc.fs = rerank.FetchStats{}
	if res, err = x.rescore(qp.p.Ctx, rq, res, qp.k, sc, &sc.fs); err != nil {
		return nil, prof, err
	}
	prof.Rerank = &sc.fs
	res = x.fillFAISS(res, qp.k)
	return res, prof, nil
}

// search is hnswsearch's search of q (q.Code on a binary index, else
// q.Vector) with p: FAISS's rows, neither rescored nor scored.
func (x *Index) search(q Query, p hnswsearch.Params, dst []Result) ([]Result, hnswsearch.Stats, error) {
	if x.idx.Binary() {
		return x.idx.SearchBinary(q.Code, p, dst)
	}
	return x.idx.Search(q.Vector, p, dst)
}

// BatchResult is one query's outcome in SearchBatch.
type BatchResult struct {
	Hits    []Result
	Profile Profile
	Err     error
}

// SearchBatch is Search over qs with up to workers goroutines (GOMAXPROCS
// when ≤ 0); each query's rows are its own.
func (x *Index) SearchBatch(qp *QueryPlan, qs []Query, workers int) []BatchResult {
	out := make([]BatchResult, len(qs))
	par.For(len(qs), workers, func(i int) {
		o := &out[i]
		o.Hits, o.Profile, o.Err = x.Search(qp, qs[i], nil)
	})
	return out
}

// Hit is one scored search result.
type Hit struct {
	ID       int64   `json:"id"`
	Distance float64 `json:"distance"`
	Score    float64 `json:"score"`
}

// Query runs one query of plan qp in the REST API's shape: vec is the
// query's values (float components, or bytes 0–255 for a binary index).
// It converts and checks the vector (normalised for cosinesimil), runs
// Search and scores each hit by the space type; hits are the real ones
// only (no −1 fills), a radial query's sorted by score. With sc the hits,
// and the profile's rerank reads, live in sc until it is reused.
func (x *Index) Query(qp *QueryPlan, vec []float64, sc *Scratch) ([]Hit, Profile, error) {
	if sc == nil {
		sc = new(Scratch)
	}
	q, err := x.queryOf(vec, sc)
	if err != nil {
		return nil, Profile{}, err
	}
	t0 := time.Now()
	res, prof, err := x.Search(qp, q, sc)
	if err != nil {
		return nil, prof, err
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
	if qp.radial != nil {
		sortByScore(hits)
	}
	return hits, prof, nil
}

// queryOf checks a request's vector (length, finite float32 values, or
// bytes 0–255 for a binary index) and makes it the query, in sc's
// buffers; for cosinesimil it is normalised.
func (x *Index) queryOf(vec []float64, sc *Scratch) (Query, error) {
	want := x.idx.Dim() // components, or bytes (0–255) for a binary index
	if len(vec) == 0 {
		return Query{}, badRequest("vector is required: index %s expects %d values", x.spec.Label, want)
	}
	if len(vec) != want {
		return Query{}, badRequest("vector has %d values, index %s expects %d", len(vec), x.spec.Label, want)
	}
	if x.idx.Binary() {
		qb := grow(sc.qb, want)
		sc.qb = qb
		for j, v := range vec {
			if v != math.Trunc(v) || v < 0 || v > 255 {
				return Query{}, badRequest("binary vector value %d is %v; bytes 0–255 expected", j, v)
			}
			qb[j] = byte(v)
		}
		return Query{Code: qb}, nil
	}
	q := grow(sc.q, want)
	sc.q = q
	var norm float64
	for j, v := range vec {
		f := float32(v) // rounds to nearest: 3.4028235e38 is float32's largest
		if math.IsNaN(v) || math.IsInf(float64(f), 0) {
			return Query{}, badRequest("vector value %d (%v) is not a finite float32", j, v)
		}
		q[j] = f
		norm += float64(f) * float64(f) // the float32 query's norm: 1e-46 is 0
	}
	if norm > math.MaxFloat32 && x.space != "cosinesimil" { // distances would overflow to ±Inf or NaN
		return Query{}, badRequest("vector's squared norm %.3g is beyond float32's range (%.3g): distances to it would overflow", norm, math.MaxFloat32)
	}
	if x.space == "cosinesimil" { // OpenSearch normalises queries for cosine
		if norm == 0 {
			return Query{}, badRequest("a zero vector has no cosine similarity")
		}
		inv := 1 / math.Sqrt(norm)
		for j := range q {
			q[j] = float32(float64(q[j]) * inv)
		}
	}
	return Query{Vector: q}, nil
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

// rescore computes full-precision distances from q (float) to the
// shortlist's vectors and returns the best k, with external ids, in
// short's array (the shortlist is consumed). sc (may be nil) holds the
// labels; fs (may be nil) gets the reads. Reads give up when ctx ends
// (nil: never); one given up at ctx's deadline ends the query with
// ErrDeadline, as the search's own reads do.
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

// fillFAISS pads rescored results to k as FAISS fills a short result: id
// and label −1, the worst distance of the rescoring metric.
func (x *Index) fillFAISS(res []hnswsearch.Result, k int) []hnswsearch.Result {
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
