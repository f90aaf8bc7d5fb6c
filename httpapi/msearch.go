package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// msearchWorkers is how many goroutines an _msearch or a search of many
// indexes may use, each holding a search slot.
const msearchWorkers = 4

// workers is the search slots a request takes beyond its first, each for
// one more goroutine answering its queries.
type workers struct{ extra int }

// run runs work on the calling goroutine and on one more for each search
// slot free, up to min(n, msearchWorkers) in all (a heavy request runs on
// one core), and returns when all have.
func (w *workers) run(s *Server, n int, heavy bool, work func()) {
	for !heavy && w.extra+1 < min(n, msearchWorkers) && s.adm.tryEnter() {
		w.extra++
	}
	var wg sync.WaitGroup
	for range w.extra {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// release gives back the extra slots.
func (w *workers) release(s *Server) {
	for range w.extra {
		s.adm.exit()
	}
	w.extra = 0
}

func (s *Server) msearch(c *gin.Context) {
	var req MSearchRequest
	var hold reqHold
	defer s.done(&hold)
	e, deadline, ok := s.bind(c, &req, &hold)
	if !ok {
		return
	}
	l := hold.l
	qp, ch, err := s.planMsearch(c.Request.Context(), l.h, &req, deadline)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer s.uncharge(ch)
	qctx, cancel := queryContext(c, l.h, deadline)
	defer cancel()
	qp.SetDeadline(deadline)
	qp.SetContext(qctx)
	start := time.Now()
	n := req.count()
	r := &msearchRun{s: s, e: e, l: l, qp: &qp, req: &req, ctx: c.Request.Context(), deadline: deadline,
		out: make([]msearchAnswer, n)}
	if !qp.Radial() { // a k-NN query has at most min(k, ntotal) hits
		r.k = min(qp.K(), int(min(l.h.x.NTotal(), int64(engine.MaxK))))
		r.hits = make([]Hit, n*r.k)
	}
	defer r.workers.release(s)
	if err := r.run(ch.heavy); err != nil {
		s.fail(c, err)
		return
	}
	took := time.Since(start)
	buf := respPool.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledBody { // a huge answer's is left to the collector
			respPool.Put(buf)
		}
	}()
	b, failed, err := msearchBody((*buf)[:0], took, r.out, qp.Radial(), req.Profile)
	*buf = b
	if err != nil {
		s.fail(c, err)
		return
	}
	for range failed {
		e.stats.failed(l.stripe)
	}
	if n := len(r.out); n > failed {
		s.queryDone(e, l, took, n, nil)
	}
	writeJSON(c, b)
}

// planMsearch validates an _msearch's parameters and number of vectors
// against h and the limits, and charges its work (checkWork).
func (s *Server) planMsearch(ctx context.Context, h *handle, req *MSearchRequest, deadline time.Time) (queryPlan, charge, error) {
	qp, err := s.plan(h, req.K, radial{req.MaxDistance, req.MinScore}, req.MethodParameters, req.Filter, req.Rescore)
	switch n := req.count(); {
	case err != nil:
		return qp, charge{}, err
	case n == 0 && req.VectorsB64 != nil:
		return qp, charge{}, badRequest("vectors_b64 must hold at least one vector")
	case n == 0:
		return qp, charge{}, badRequest("vectors must hold at least one vector")
	case n > s.limits.MaxMsearchVectors:
		return qp, charge{}, badRequest("_msearch has %d vectors, at most %d (max_msearch_vectors)", n, s.limits.MaxMsearchVectors)
	}
	ch, err := s.checkWork(ctx, qp, req.count(), deadline)
	return qp, ch, err
}

// msearchAnswer is one query's answer: its hits, or the error that failed
// it alone.
type msearchAnswer struct {
	hits []Hit
	prof Profile
	err  error
}

// msearchRun answers an _msearch's queries on a few workers, each taking
// the next query; an error that ends the whole request (a deadline, a
// shutdown, a changed file) stops them all.
type msearchRun struct {
	s        *Server
	e        *entry
	l        lease
	qp       *queryPlan
	req      *MSearchRequest // its vectors
	ctx      context.Context
	deadline time.Time
	out      []msearchAnswer
	k        int   // the most hits a k-NN query has; 0: radial
	hits     []Hit // k for each query, its hits kept there (keep)
	workers        // search slots taken beyond bind's
	next     atomic.Int64
	stopped  atomic.Pointer[error] // the first error that ends the request
}

// run answers every query, on up to msearchWorkers goroutines (a heavy
// request on one core), and returns the error that ended the request, if
// one did.
func (r *msearchRun) run(heavy bool) error {
	r.workers.run(r.s, len(r.out), heavy, r.work)
	if p := r.stopped.Load(); p != nil {
		return *p
	}
	return nil
}

// work answers the next query until none is left or the request ends.
// Its queries share one scratch, so a k-NN query allocates nothing of its
// own: each one's hits are copied out of the scratch (keep).
func (r *msearchRun) work() {
	sc := scratchPool.Get().(*queryScratch)
	defer scratchPool.Put(sc)
	for {
		i := int(r.next.Add(1) - 1)
		if i >= len(r.out) || r.stopped.Load() != nil {
			return
		}
		if err := r.ended(); err != nil {
			r.stop(err)
			return
		}
		o := &r.out[i]
		r.answer(o, r.req.query(i), sc)
		if o.err == nil {
			r.keep(i, o)
		}
		if err := r.fatal(o.err); err != nil {
			r.stop(err)
			return
		}
	}
}

func (r *msearchRun) stop(err error) { r.stopped.CompareAndSwap(nil, &err) }

// ended says why the request must stop before its next query, if it must:
// its deadline passed, the server is shutting down, or the client left.
func (r *msearchRun) ended() error {
	switch {
	case time.Now().After(r.deadline):
		return errTimeout
	case r.ctx.Err() == nil:
		return nil
	case errors.Is(context.Cause(r.ctx), errShuttingDown):
		return errShuttingDown
	}
	return errClientClosed()
}

// answer runs one query into o, in sc; a panic fails that query alone.
func (r *msearchRun) answer(o *msearchAnswer, q query, sc *queryScratch) {
	defer func() {
		if p := recover(); p != nil {
			r.s.log.Error("panic in an _msearch query", "index", r.e.name, "panic", fmt.Sprint(p))
			o.err = errInternal()
			*sc = queryScratch{} // what the query left there is not to be trusted
		}
	}()
	o.hits, o.prof, o.err = r.s.searchOne(r.l.h, r.qp, q, sc)
}

// keep copies what of o, query i's answer, lives in the worker's scratch
// until its next query (the hits, the rerank's reads) out of it: a k-NN
// query's hits into its place in r.hits, a radial query's (any number)
// into their own array.
func (r *msearchRun) keep(i int, o *msearchAnswer) {
	if o.prof.Rerank != nil {
		fs := *o.prof.Rerank
		o.prof.Rerank = &fs
	}
	if len(o.hits) > r.k {
		o.hits = slices.Clone(o.hits)
		return
	}
	dst := r.hits[i*r.k : i*r.k+len(o.hits) : (i+1)*r.k]
	copy(dst, o.hits)
	o.hits = dst
}

// fatal is the request's answer when a query's error ends the whole
// request (the index's file changed, the deadline passed, the server is
// shutting down); nil when err fails that query alone, or is nil.
func (r *msearchRun) fatal(err error) error {
	switch {
	case err == nil:
		return nil
	case isFileChanged(err):
		r.s.queryFailed(r.e, r.l, err)
		return r.l.h.failure(err)
	case errors.Is(err, engine.ErrDeadline):
		return errTimeout
	case errors.Is(err, errShuttingDown):
		return errShuttingDown
	}
	return nil
}

// msearchBody appends to b an _msearch's answer: each query's hits or
// error, in the order of the vectors; failed counts the errors.
func msearchBody(b []byte, took time.Duration, out []msearchAnswer, radial, profile bool) (_ []byte, failed int, err error) {
	size := 64 // the envelope and its closing "]}\n"
	for i := range out {
		size += 16 + hitBytes*len(out[i].hits)
	}
	if cap(b)-len(b) < size {
		b = slices.Grow(b, size) // one allocation, not a doubling series of them
	}
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
		var err error
		if b, err = appendResult(append(b, '{'), o.hits, &o.prof, radial, profile); err != nil {
			return nil, failed, err
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...), failed, nil
}
