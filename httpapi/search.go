package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// IntParam is an integer request field that tells an absent field (Set
// false) from an explicit null (Set and Null) and a value.
type IntParam struct {
	V    int
	Set  bool
	Null bool
}

// UnmarshalJSON reads an integer or null (encoding/json calls it for null
// too); anything else is an error.
func (p *IntParam) UnmarshalJSON(b []byte) error {
	*p = IntParam{Set: true}
	if string(b) == "null" {
		p.Null = true
		return nil
	}
	return json.Unmarshal(b, &p.V)
}

// MethodParameters are the HNSW search parameters of a request.
type MethodParameters struct {
	EfSearch int `json:"ef_search"`
}

// IDFilter allows only these external ids.
type IDFilter struct {
	IDs []int64 `json:"ids"`
}

// Rescore overrides the index's rerank settings for one request.
type Rescore struct {
	OversampleFactor float64 `json:"oversample_factor"`
}

// SearchRequest is the body of POST /indexes/{name}/_search.
type SearchRequest struct {
	Vector           Vector            `json:"vector"`
	K                IntParam          `json:"k"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Rescore          *Rescore          `json:"rescore"`
	Profile          bool              `json:"profile"`
}

// MSearchRequest is the body of POST /indexes/{name}/_msearch.
type MSearchRequest struct {
	Vectors          []Vector          `json:"vectors"`
	K                IntParam          `json:"k"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Rescore          *Rescore          `json:"rescore"`
	Profile          bool              `json:"profile"`
}

// Hit is one search result.
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
}

// queryPlan is a request's validated parameters, shared by its queries.
type queryPlan struct {
	p       hnswsearch.Params // p.K is the shortlist when rescoring
	k       int               // hits returned
	rescore bool
	work    int64 // max(p.K, ef): what one query may hold
}

// plan validates a request's k, ef_search, filter and rescore against h and
// the limits, before anything is allocated by them.
func (s *Server) plan(h *handle, k IntParam, mp *MethodParameters, filter *IDFilter, rs *Rescore) (queryPlan, error) {
	var qp queryPlan
	switch {
	case !k.Set:
		qp.k = DefaultK
	case k.Null:
		return qp, badRequest("k is null; give a number in [1, %d] or leave k out (default %d)", hnswsearch.MaxK, DefaultK)
	case k.V < 1 || k.V > hnswsearch.MaxK:
		return qp, badRequest("k=%d is out of range [1, %d]", k.V, hnswsearch.MaxK)
	default:
		qp.k = k.V
	}
	qp.p.K = qp.k
	ef := h.idx.EfSearch()
	if mp != nil {
		if mp.EfSearch < 1 || mp.EfSearch > s.limits.MaxEfSearch {
			return qp, badRequest("method_parameters.ef_search=%d is out of range [1, %d]", mp.EfSearch, s.limits.MaxEfSearch)
		}
		qp.p.EfSearch, ef = mp.EfSearch, mp.EfSearch
	}
	if filter != nil {
		qp.p.Filter = filter.IDs
		if qp.p.Filter == nil {
			qp.p.Filter = []int64{}
		}
	}
	if rs != nil && h.rer == nil {
		return qp, badRequest("rescore needs an index loaded with rerank.vectors_path")
	}
	qp.rescore = h.rer != nil && (rs == nil || rs.OversampleFactor >= 0)
	if qp.rescore {
		f := h.spec.Rerank.OversampleFactor
		if rs != nil && rs.OversampleFactor > 0 {
			f = rs.OversampleFactor
		}
		if f <= 0 {
			f = rerank.DefaultOversample(h.rer.Dim)
		}
		qp.p.K = rerank.ShortlistSize(qp.k, f)
	}
	if err := qp.p.Validate(); err != nil {
		return qp, err
	}
	qp.work = int64(max(qp.p.K, ef))
	return qp, nil
}

// checkWork refuses a request of n queries that would exceed MaxRequestWork.
func (s *Server) checkWork(qp queryPlan, n int) error {
	if w := qp.work * int64(n); w > s.limits.MaxRequestWork {
		return badRequest("request asks for %d queries × max(k or shortlist, ef_search) %d = %d, above the limit of %d (max_request_work)",
			n, qp.work, w, s.limits.MaxRequestWork)
	}
	return nil
}

// queryScratch is one query's buffers, reused across requests (nil: the
// query allocates its own, as _msearch's do since they outlive the call).
type queryScratch struct {
	req  SearchRequest // the request, decoded (search only)
	q    []float32
	qb   []byte
	res  []hnswsearch.Result
	hits []Hit
}

var scratchPool = sync.Pool{New: func() any { return new(queryScratch) }}

// grow returns b[:n], reallocated only when its capacity is short; n has
// been validated by the caller.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// searchOne runs one query of plan qp on h, in sc's buffers when sc is not
// nil (the hits then live there until sc is reused).
func (s *Server) searchOne(h *handle, qp *queryPlan, vec Vector, sc *queryScratch) ([]Hit, Profile, error) {
	if sc == nil {
		sc = new(queryScratch)
	}
	var prof Profile
	x := h.idx
	if vec == nil {
		return nil, prof, badRequest("vector is required")
	}
	want := x.Dim() // components, or bytes (0–255) for a binary index
	if len(vec) != want {
		return nil, prof, badRequest("vector has %d values, index %s expects %d", len(vec), h.spec.Path, want)
	}
	var q []float32
	var qb []byte
	if x.Binary() {
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
			if !finite32(v) {
				return nil, prof, badRequest("vector value %d (%v) is not a finite float32", j, v)
			}
			q[j] = float32(v)
			norm += v * v
		}
		if h.space == "cosinesimil" { // OpenSearch normalises queries for cosine
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
	res := grow(sc.res, qp.p.K)[:0] // the search appends no more
	defer func() { sc.res = res[:0] }()
	var st hnswsearch.Stats
	var err error
	if x.Binary() {
		res, st, err = x.SearchBinary(qb, qp.p, res)
	} else {
		res, st, err = x.Search(q, qp.p, res)
	}
	if err != nil {
		return nil, prof, err
	}
	prof.Stats = st
	if qp.rescore && !x.Binary() {
		labels := make([]int32, 0, len(res))
		for _, r := range res {
			if r.Label >= 0 {
				labels = append(labels, r.Label)
			}
		}
		var fs rerank.FetchStats
		rh, err := h.rer.Rescore(q, labels, qp.k, h.space != "l2", &fs)
		if err != nil {
			return nil, prof, err
		}
		prof.Rerank = &fs
		res = res[:0]
		for _, r := range rh {
			id, err := x.ExternalID(r.Label)
			if err != nil {
				return nil, prof, err
			}
			res = append(res, hnswsearch.Result{ID: id, Distance: r.Distance, Label: r.Label})
		}
	}
	prof.Micros = float64(time.Since(t0).Nanoseconds()) / 1e3
	hits := grow(sc.hits, len(res))[:0]
	defer func() { sc.hits = hits[:0] }()
	for _, r := range res {
		if r.ID < 0 {
			continue // OpenSearch returns only real hits
		}
		hits = append(hits, Hit{ID: r.ID, Distance: float64(r.Distance), Score: score(h.space, r.Distance)})
	}
	return hits, prof, nil
}

// admit takes a search slot for the request, or answers it (429) and
// reports false.
func (s *Server) admit(c *gin.Context) (deadline time.Time, ok bool) {
	deadline = time.Now().Add(s.cfg.RequestTimeout)
	if err := s.adm.enter(c.Request.Context(), deadline); err != nil {
		s.fail(c, err)
		return deadline, false
	}
	return deadline, true
}

func (s *Server) search(c *gin.Context) {
	deadline, ok := s.admit(c)
	if !ok {
		return
	}
	defer s.adm.exit()
	// The request decodes into the scratch's own, reusing its vector's array.
	sc := scratchPool.Get().(*queryScratch)
	defer scratchPool.Put(sc)
	req := &sc.req
	*req = SearchRequest{Vector: req.Vector[:0]}
	defer func() {
		if cap(req.Vector) > 1<<16 { // a huge vector's array is not kept
			req.Vector = nil
		}
	}()
	e, l, ok := s.bind(c, req)
	if !ok {
		return
	}
	defer l.release()
	h := l.h
	qp, err := s.plan(h, req.K, req.MethodParameters, req.Filter, req.Rescore)
	if err == nil {
		err = s.checkWork(qp, 1)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	qp.p.Deadline = deadline
	start := time.Now()
	hits, prof, err := s.searchOne(h, &qp, req.Vector, sc)
	took := time.Since(start)
	if err != nil {
		s.queryFailed(e, l, err)
		s.fail(c, h.failure(err))
		return
	}
	s.queryDone(e, l, took, 1, &prof)
	buf := respPool.Get().(*[]byte)
	b := append((*buf)[:0], `{"took":`...)
	b = appendTook(b, took)
	b = append(b, `,"hits":`...)
	b = appendHits(b, hits)
	if req.Profile {
		pj, err := json.Marshal(prof)
		if err != nil {
			s.fail(c, err)
			return
		}
		b = append(append(b, `,"profile":`...), pj...)
	}
	b = append(b, '}')
	writeJSON(c, b)
	*buf = b
	respPool.Put(buf)
}

// queryDone records a successful request of n queries.
func (s *Server) queryDone(e *entry, l lease, took time.Duration, n int, prof *Profile) {
	e.stats.ok(l.stripe, took/time.Duration(n), int64(n))
	im := s.metrics.index(e.name)
	im.latency.observe(l.stripe, took/time.Duration(n))
	if prof == nil {
		return
	}
	if prof.IO.CacheHits > 0 {
		im.hits.add(l.stripe, uint64(prof.IO.CacheHits))
	}
	if prof.IO.CacheMisses > 0 {
		im.misses.add(l.stripe, uint64(prof.IO.CacheMisses))
	}
}

// queryFailed records a failed query; a file that changed under the
// handle marks it failed.
func (s *Server) queryFailed(e *entry, l lease, err error) {
	e.stats.failed(l.stripe)
	if isFileChanged(err) && l.h.markFailed(err) {
		s.log.Error("index file changed under a served index; searches answer 503 until it is reloaded or switched",
			"index", e.name, "path", l.h.spec.Path, "error", err.Error())
	}
}

var respPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// jsonContentType is shared by every response: net/http only reads header
// values, and one slice saves the three allocations of c.Data (its render
// value, the header's slice and the MIME key's canonical form) per search.
var jsonContentType = []string{"application/json; charset=utf-8"}

// writeJSON sends b, a JSON document, with status 200.
func writeJSON(c *gin.Context, b []byte) {
	c.Writer.Header()["Content-Type"] = jsonContentType
	c.Status(200)
	c.Writer.Write(b)
}

// appendTook writes a duration as `took` is spelled everywhere: fractional
// milliseconds.
func appendTook(b []byte, took time.Duration) []byte {
	return strconv.AppendFloat(b, float64(took.Microseconds())/1000, 'g', -1, 64)
}

// appendHits writes [{"id","distance","score"}…] directly (encoding/json's
// reflection over maps cost more than the search of a small index), the
// one spelling of hits in _search and _msearch. Distances are the shortest
// text that reads back as the same float32.
func appendHits(b []byte, hits []Hit) []byte {
	b = append(b, '[')
	for i, h := range hits {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, h.ID, 10)
		b = append(b, `,"distance":`...)
		b = strconv.AppendFloat(b, h.Distance, 'g', -1, 32)
		b = append(b, `,"score":`...)
		b = strconv.AppendFloat(b, h.Score, 'g', -1, 64)
		b = append(b, '}')
	}
	return append(b, ']')
}

// msearchWorkers is how many goroutines an _msearch may use, each holding
// a search slot.
const msearchWorkers = 4

// errTimeout answers a request whose search outlived request_timeout.
var errTimeout = &apiError{504, "search_timeout", "the search did not finish within the request timeout; the rest of its work was dropped"}

func (s *Server) msearch(c *gin.Context) {
	deadline, ok := s.admit(c)
	if !ok {
		return
	}
	slots := 1
	defer func() {
		for range slots {
			s.adm.exit()
		}
	}()
	var req MSearchRequest
	e, l, ok := s.bind(c, &req)
	if !ok {
		return
	}
	defer l.release()
	h := l.h
	n := len(req.Vectors)
	qp, err := s.plan(h, req.K, req.MethodParameters, req.Filter, req.Rescore)
	switch {
	case err != nil:
	case n == 0:
		err = badRequest("vectors must hold at least one vector")
	case n > s.limits.MaxMsearchVectors:
		err = badRequest("_msearch has %d vectors, at most %d (max_msearch_vectors)", n, s.limits.MaxMsearchVectors)
	default:
		err = s.checkWork(qp, n)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	qp.p.Deadline = deadline
	start := time.Now()
	type one struct {
		hits []Hit
		prof Profile
		err  error
	}
	out := make([]one, n)
	var next atomic.Int64
	var stopped atomic.Pointer[error] // the first error that ends the whole request
	stop := func(err error) { stopped.CompareAndSwap(nil, &err) }
	ctx := c.Request.Context()
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n || stopped.Load() != nil {
				return
			}
			if time.Now().After(deadline) {
				stop(errTimeout)
				return
			}
			if ctx.Err() != nil {
				stop(&apiError{499, "client_closed_request", "the client went away"})
				return
			}
			o := &out[i]
			func() {
				defer func() {
					if p := recover(); p != nil {
						s.log.Error("panic in an _msearch query", "index", e.name, "panic", fmt.Sprint(p))
						o.err = &apiError{500, "internal_error", "internal error"}
					}
				}()
				o.hits, o.prof, o.err = s.searchOne(h, &qp, req.Vectors[i], nil)
			}()
			switch {
			case o.err == nil:
			case isFileChanged(o.err):
				s.queryFailed(e, l, o.err)
				stop(h.failure(o.err))
				return
			case errors.Is(o.err, hnswsearch.ErrDeadline):
				stop(errTimeout)
				return
			}
		}
	}
	for slots < min(n, msearchWorkers) && s.adm.tryEnter() {
		slots++
	}
	var wg sync.WaitGroup
	for range slots - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	if p := stopped.Load(); p != nil {
		s.fail(c, *p)
		return
	}
	took := time.Since(start)
	failed := 0
	b := append([]byte(nil), `{"took":`...)
	b = appendTook(b, took)
	b = append(b, `,"responses":[`...)
	for i := range out {
		o := &out[i]
		if i > 0 {
			b = append(b, ',')
		}
		if o.err != nil {
			failed++
			st, typ := errStatus(o.err)
			eb, _ := json.Marshal(gin.H{"type": typ, "reason": o.err.Error(), "status": st})
			b = append(append(append(b, `{"error":`...), eb...), '}')
			continue
		}
		b = appendHits(append(b, `{"hits":`...), o.hits)
		if req.Profile {
			pj, err := json.Marshal(o.prof)
			if err != nil {
				s.fail(c, err)
				return
			}
			b = append(append(b, `,"profile":`...), pj...)
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	for range failed {
		e.stats.failed(l.stripe)
	}
	if n > failed {
		s.queryDone(e, l, took, n, nil)
	}
	writeJSON(c, b)
}

// isFileChanged reports whether err says the index's file changed under it.
func isFileChanged(err error) bool {
	return errors.Is(err, errFileChanged)
}
