package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// queryScratch is one query's buffers, reused across requests and, in an
// _msearch, across a worker's queries (nil: the query allocates its own).
type queryScratch struct {
	req  SearchRequest // the request, decoded (search only)
	vals []float64     // a vector_b64's values
	eng  engine.Scratch
}

var scratchPool = sync.Pool{New: func() any { return new(queryScratch) }}

// searchOne runs one query of plan qp on h, in sc's buffers when sc is not
// nil (the hits then live there until sc is reused).
func (s *Server) searchOne(h *handle, qp *queryPlan, q query, sc *queryScratch) ([]Hit, Profile, error) {
	var es *engine.Scratch
	var buf []float64
	if sc != nil {
		es, buf = &sc.eng, sc.vals
	}
	vec, buf, err := q.values(h, buf)
	if sc != nil {
		sc.vals = buf
	}
	if err != nil {
		return nil, Profile{}, err
	}
	return h.x.Query(qp, vec, es)
}

func (s *Server) search(c *gin.Context) {
	// The request decodes into the scratch's own, reusing its vector's
	// arrays.
	sc := scratchPool.Get().(*queryScratch)
	defer scratchPool.Put(sc)
	req := &sc.req
	*req = SearchRequest{Vector: req.Vector[:0], VectorB64: VectorB64{b: req.VectorB64.b[:0]}}
	defer func() {
		if cap(req.Vector) > 1<<16 { // a huge vector's arrays are not kept
			req.Vector = nil
		}
		if cap(req.VectorB64.b) > 1<<16 || cap(sc.vals) > 1<<16 {
			req.VectorB64.b, sc.vals = nil, nil
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
	var err error
	filter := req.Filter
	if req.Filters != nil { // its one target's own allow-list, if it has one
		err = req.checkFilters(func(n string) bool { return n == e.name })
		filter = req.filterOf(e.name)
	}
	var qp queryPlan
	if err == nil {
		qp, err = s.plan(h, req.K, radial{req.MaxDistance, req.MinScore}, req.MethodParameters, filter, req.Rescore)
	}
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
	hits, prof, err := s.searchOne(h, &qp, req.query(), sc)
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
	b, err = appendResult(append(b, ','), hits, &prof, qp.Radial(), req.Profile)
	if err != nil {
		s.fail(c, err)
		return
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

// errTimeout answers a request whose search outlived request_timeout.
var errTimeout = errGatewayTimeout("search_timeout", "the search did not finish within the request timeout; the rest of its work was dropped")

// reqHold is what a search request holds while it runs: its body, a
// search slot and a lease on the index; Server.done gives them back.
type reqHold struct {
	body body
	e    *entry // holds a slot of e.adm
	slot bool   // holds a slot of the server's admission
	l    lease
}

func (s *Server) done(h *reqHold) {
	if h.l.h != nil {
		h.l.release()
	}
	if h.slot {
		s.adm.exit()
	}
	if h.e != nil {
		h.e.adm.exit()
	}
	s.release(&h.body)
}

// bind decodes the body into req, then takes a slot of the index's share
// (entry.adm) and of the server's, and a lease on the index the path
// names, recorded in hold for the caller to give back with done (whatever
// bind returns); on failure it has answered the request and ok is false.
// The body is read before the slots are taken, so a slow client holds
// none.
func (s *Server) bind(c *gin.Context, req any, hold *reqHold) (e *entry, deadline time.Time, ok bool) {
	if err := s.decode(c, req, &hold.body); err != nil {
		s.fail(c, err)
		return nil, deadline, false
	}
	deadline = time.Now().Add(s.cfg.RequestTimeout)
	if e = s.Reg.get(c.Param("name")); e == nil {
		s.fail(c, errIndexNotFound(c.Param("name")))
		return nil, deadline, false
	}
	if err := e.adm.enter(c.Request.Context(), deadline); err != nil {
		s.fail(c, err)
		return nil, deadline, false
	}
	hold.e = e
	if err := s.adm.enter(c.Request.Context(), deadline); err != nil {
		s.fail(c, err)
		return nil, deadline, false
	}
	hold.slot = true
	l, err := e.lease()
	if err == nil {
		hold.l = l
		err = l.h.usable()
	}
	if err != nil {
		s.fail(c, err)
		return nil, deadline, false
	}
	return e, deadline, true
}
