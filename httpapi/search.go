package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
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

// FloatParam is a number request field that tells an absent field (Set
// false) from an explicit null (Set and Null) and a value.
type FloatParam struct {
	V    float64
	Set  bool
	Null bool
}

// UnmarshalJSON reads a number or null; anything else is an error.
func (p *FloatParam) UnmarshalJSON(b []byte) error {
	*p = FloatParam{Set: true}
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
	IDs IDList `json:"ids"`
}

// IDList is a filter's ids; a null among them is an error, not id 0.
type IDList []int64

// UnmarshalJSON implements json.Unmarshaler.
func (l *IDList) UnmarshalJSON(b []byte) error {
	ids, err := decodeNonNull[int64](b, "filter.ids", "id")
	*l = ids
	return err
}

// Rescore overrides the index's rerank settings for one request.
type Rescore struct {
	OversampleFactor float64 `json:"oversample_factor"`
}

// SearchRequest is the body of POST /indexes/{name}/_search.
type SearchRequest struct {
	Vector           Vector            `json:"vector"`
	K                IntParam          `json:"k"`
	MaxDistance      FloatParam        `json:"max_distance"`
	MinScore         FloatParam        `json:"min_score"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Rescore          *Rescore          `json:"rescore"`
	Profile          bool              `json:"profile"`
}

// MSearchRequest is the body of POST /indexes/{name}/_msearch.
type MSearchRequest struct {
	Vectors          []Vector          `json:"vectors"`
	K                IntParam          `json:"k"`
	MaxDistance      FloatParam        `json:"max_distance"`
	MinScore         FloatParam        `json:"min_score"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Rescore          *Rescore          `json:"rescore"`
	Profile          bool              `json:"profile"`
}

// Hit is one search result; Profile a query's search statistics and I/O.
type (
	Hit     = engine.Hit
	Profile = engine.Profile
)

// queryPlan is a request's validated parameters, shared by its queries.
type queryPlan = engine.QueryPlan

// radial is a request's max_distance and min_score: a radial query when
// one is set (in place of k).
type radial struct{ maxDistance, minScore FloatParam }

// plan validates a request's k (or max_distance / min_score), ef_search,
// filter and rescore against h and the limits, before anything is
// allocated by them.
func (s *Server) plan(h *handle, k IntParam, rad radial, mp *MethodParameters, filter *IDFilter, rs *Rescore) (queryPlan, error) {
	r := engine.Request{K: k.V, MaxEfSearch: s.limits.MaxEfSearch, MaxResults: s.limits.MaxRadialResults}
	md, ms := rad.maxDistance, rad.minScore
	n := 0
	for _, set := range []bool{k.Set, md.Set, ms.Set} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return queryPlan{}, badRequest("give exactly one of k, max_distance and min_score")
	case md.Null:
		return queryPlan{}, badRequest("max_distance is null; give a number or use k or min_score")
	case ms.Null:
		return queryPlan{}, badRequest("min_score is null; give a number or use k or max_distance")
	case md.Set:
		r.MaxDistance = &md.V
	case ms.Set:
		r.MinScore = &ms.V
	case !k.Set:
		r.K = DefaultK
	case k.Null:
		return queryPlan{}, badRequest("k is null; give a number in [1, %d] or leave k out (default %d)", engine.MaxK, DefaultK)
	}
	if mp != nil {
		r.EfSearch, r.EfSearchSet = mp.EfSearch, true
	}
	if filter != nil {
		r.Filter = filter.IDs
		if r.Filter == nil {
			r.Filter = []int64{}
		}
	}
	if rs != nil {
		// The engine takes a negative factor as "skip the rescoring"; over
		// REST that would return an on_disk index's estimated distances as
		// if they were exact, so it is refused.
		if rs.OversampleFactor < 0 {
			return queryPlan{}, badRequest("rescore.oversample_factor %g is negative (0 or absent: the index's)", rs.OversampleFactor)
		}
		r.Rescore = &engine.Rescore{Oversample: rs.OversampleFactor}
	}
	return h.x.Plan(r)
}

// charge is what a running search holds of the shared work bounds: its
// work in max_work_in_flight and, when heavy, a place in the heavy lane.
type charge struct {
	work  int64
	heavy bool
}

// checkWork refuses a request of n queries of plan qp that would exceed
// MaxRequestWork, sheds it when max_work_in_flight is reached, and puts a
// heavy plan (one query's effort ≥ HeavyQueryWork) in the heavy lane,
// waiting there until deadline. The caller gives the charge back with
// uncharge.
func (s *Server) checkWork(ctx context.Context, qp queryPlan, n int, deadline time.Time) (charge, error) {
	w := qp.Work() * int64(n)
	if w > s.limits.MaxRequestWork {
		return charge{}, badRequest("request asks for %d queries × max(k, shortlist or radial cap, ef_search) %d = %d, above the limit of %d (max_request_work)",
			n, qp.Work(), w, s.limits.MaxRequestWork)
	}
	if !s.workMem.take(w) {
		return charge{}, errWorkBusy
	}
	ch := charge{work: w}
	if qp.Effort() >= s.limits.HeavyQueryWork {
		if err := s.heavy.enter(ctx, deadline); err != nil {
			s.workMem.give(w)
			return charge{}, errHeavyBusy
		}
		ch.heavy = true
	}
	return ch, nil
}

// uncharge gives back what checkWork charged.
func (s *Server) uncharge(ch charge) {
	s.workMem.give(ch.work)
	if ch.heavy {
		s.heavy.exit()
	}
}

// errWorkBusy sheds a request whose work would take the requests in flight
// past max_work_in_flight.
var errWorkBusy = &apiError{429, "too_many_requests", "too much search work in flight (max_work_in_flight); retry later"}

// errHeavyBusy sheds a heavy search when the heavy lane and its queue are
// full.
var errHeavyBusy = &apiError{429, "too_many_requests", "too many heavy searches in flight (a query's work of at least heavy_query_work; max_heavy_searches run at once); retry later"}

// queryScratch is one query's buffers, reused across requests (nil: the
// query allocates its own, as _msearch's do since they outlive the call).
type queryScratch struct {
	req SearchRequest // the request, decoded (search only)
	eng engine.Scratch
}

var scratchPool = sync.Pool{New: func() any { return new(queryScratch) }}

// searchOne runs one query of plan qp on h, in sc's buffers when sc is not
// nil (the hits then live there until sc is reused).
func (s *Server) searchOne(h *handle, qp *queryPlan, vec Vector, sc *queryScratch) ([]Hit, Profile, error) {
	var es *engine.Scratch
	if sc != nil {
		es = &sc.eng
	}
	return h.x.Query(qp, vec, es)
}

func (s *Server) search(c *gin.Context) {
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
	var hold reqHold
	defer s.done(&hold)
	e, deadline, ok := s.bind(c, req, &hold)
	if !ok {
		return
	}
	l := hold.l
	h := l.h
	qp, err := s.plan(h, req.K, radial{req.MaxDistance, req.MinScore}, req.MethodParameters, req.Filter, req.Rescore)
	var ch charge
	if err == nil {
		ch, err = s.checkWork(c.Request.Context(), qp, 1, deadline)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	defer s.uncharge(ch)
	qctx, cancel := queryContext(c, h, deadline)
	defer cancel()
	qp.SetDeadline(deadline)
	qp.SetContext(qctx)
	start := time.Now()
	hits, prof, err := s.searchOne(h, &qp, req.Vector, sc)
	took := time.Since(start)
	if err != nil {
		s.queryFailed(e, l, err)
		switch {
		case errors.Is(err, engine.ErrDeadline):
			err = errTimeout
		case errors.Is(err, errShuttingDown):
			err = errShuttingDown
		}
		s.fail(c, h.failure(err))
		return
	}
	s.queryDone(e, l, took, 1, &prof)
	buf := respPool.Get().(*[]byte)
	b := append((*buf)[:0], `{"took":`...)
	b = appendTook(b, took)
	b = append(b, `,"hits":`...)
	b = appendHits(b, hits)
	if qp.Radial() {
		b = appendTruncated(b, prof.Truncated)
	}
	if req.Profile {
		pj, err := json.Marshal(prof)
		if err != nil {
			s.fail(c, err)
			return
		}
		b = append(append(b, `,"profile":`...), pj...)
	}
	b = append(b, "}\n"...)
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
			"index", e.name, "path", l.h.spec.Path, "error", err.Error(), "detail", changeDetail(err))
	}
}

var respPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// jsonContentType is shared by every response: net/http only reads header
// values, and one slice saves the three allocations of c.Data (its render
// value, the header's slice and the MIME key's canonical form) per search.
var jsonContentType = []string{"application/json; charset=utf-8"}

// sendJSON sends obj as JSON with status, ending in a newline as every
// body the API writes does (a shell prompt after `curl` starts on its own
// line, as after OpenSearch's).
func sendJSON(c *gin.Context, status int, obj any) {
	b, err := json.Marshal(obj)
	if err != nil {
		status, b = 500, []byte(`{"error":{"type":"internal_error","reason":"internal error"},"status":500}`)
	}
	c.Writer.Header()["Content-Type"] = jsonContentType
	c.Status(status)
	c.Writer.Write(append(b, '\n'))
}

// writeJSON sends b, a JSON document ending in a newline, with status 200.
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

// appendTruncated writes a radial answer's flag: whether the cap
// (engine.DefaultMaxRadialResults) cut its hits.
func appendTruncated(b []byte, t bool) []byte {
	return strconv.AppendBool(append(b, `,"truncated":`...), t)
}

// hitBytes is about what one hit takes as JSON (id, distance, score).
const hitBytes = 64

// msearchWorkers is how many goroutines an _msearch may use, each holding
// a search slot.
const msearchWorkers = 4

// queryContext is a search request's context for its queries on h: it
// ends at deadline, when the client goes away, or when a shutdown's grace
// period ends, and with it every read the queries wait on (a stalled
// object store answers 504 at the deadline rather than never). An index
// reading no object gets the request's own context (no deadline, no
// allocation): its reads never wait long.
func queryContext(c *gin.Context, h *handle, deadline time.Time) (context.Context, context.CancelFunc) {
	if !h.readsObjects() {
		return c.Request.Context(), noCancel
	}
	return context.WithDeadline(c.Request.Context(), deadline)
}

var noCancel context.CancelFunc = func() {}

// readsObjects reports whether h reads a file from an object store: the
// index, its vector file or its rerank vectors.
func (h *handle) readsObjects() bool {
	sp := &h.spec
	return engine.IsRemote(sp.Path) || engine.IsRemote(sp.VectorsPath) || sp.Rerank != nil && engine.IsRemote(sp.Rerank.VectorsPath)
}

// errTimeout answers a request whose search outlived request_timeout.
var errTimeout = &apiError{504, "search_timeout", "the search did not finish within the request timeout; the rest of its work was dropped"}

func (s *Server) msearch(c *gin.Context) {
	var req MSearchRequest
	var hold reqHold
	defer s.done(&hold)
	e, deadline, ok := s.bind(c, &req, &hold)
	if !ok {
		return
	}
	l := hold.l
	slots := 1 // bind's; the extra workers' are given back below
	defer func() {
		for range slots - 1 {
			s.adm.exit()
		}
	}()
	h := l.h
	ctx := c.Request.Context()
	n := len(req.Vectors)
	qp, err := s.plan(h, req.K, radial{req.MaxDistance, req.MinScore}, req.MethodParameters, req.Filter, req.Rescore)
	var ch charge
	switch {
	case err != nil:
	case n == 0:
		err = badRequest("vectors must hold at least one vector")
	case n > s.limits.MaxMsearchVectors:
		err = badRequest("_msearch has %d vectors, at most %d (max_msearch_vectors)", n, s.limits.MaxMsearchVectors)
	default:
		ch, err = s.checkWork(ctx, qp, n, deadline)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	defer s.uncharge(ch)
	qctx, cancel := queryContext(c, h, deadline)
	defer cancel()
	qp.SetDeadline(deadline)
	qp.SetContext(qctx)
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
				if errors.Is(context.Cause(ctx), errShuttingDown) {
					stop(errShuttingDown)
				} else {
					stop(&apiError{499, "client_closed_request", "the client went away"})
				}
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
			case errors.Is(o.err, engine.ErrDeadline):
				stop(errTimeout)
				return
			case errors.Is(o.err, errShuttingDown):
				stop(errShuttingDown)
				return
			}
		}
	}
	for !ch.heavy && slots < min(n, msearchWorkers) && s.adm.tryEnter() { // a heavy request runs on one core
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
	size := 64 // the envelope and its closing "]}\n"
	for i := range out {
		size += 16 + hitBytes*len(out[i].hits)
	}
	b := make([]byte, 0, size) // one allocation, not a doubling series of them
	b = append(b, `{"took":`...)
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
		if qp.Radial() {
			b = appendTruncated(b, o.prof.Truncated)
		}
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
	b = append(b, "]}\n"...)
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
