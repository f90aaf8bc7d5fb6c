package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// A search of many indexes (a target list, a pattern or an alias) runs
// the one query on each of its indexes in parallel and answers their
// merged best: engine.MergeHits's rule, score descending, then the
// indexes' name order, then each index's own order. Each hit names its
// index ("_index"), and "_shards" counts the indexes searched, skipped
// (an empty allow-list) and failed, with why each failed. POST /_msearch
// runs many such searches in one request.

// multiSearch is one search of many indexes: a _search of a target list,
// or one search of a POST /_msearch.
type multiSearch struct {
	req    *SearchRequest
	list   string // the targets as sent
	exprs  []targetExpr
	single bool    // one index named as such: answered as its own _search
	parts  []*part // its indexes, by name
	err    error   // the search's answer when it fails as a whole
	k      int     // the hits kept: k, or a radial query's cap
	radial bool
	took   time.Duration
}

// part is one index of a search: its plan and its answer.
type part struct {
	t    *target
	qp   queryPlan
	skip bool  // an empty allow-list: not searched
	q    query // the search's vector, read for this index when it runs
	hits []Hit
	prof Profile
	err  error
	// start and end bound the query (a search's took spans its parts').
	start, end time.Time
}

// allowPartial reports whether a failed index leaves the others' hits the
// answer.
func (ms *multiSearch) allowPartial() bool {
	return ms.req.AllowPartialResults == nil || *ms.req.AllowPartialResults
}

// multiRun runs the searches of one request: it holds the leases on their
// indexes, the index shares and search slots they take, and the work
// charged, until end.
type multiRun struct {
	s        *Server
	ctx      context.Context // the request's
	qctx     context.Context // the queries': the deadline too when an index reads objects
	cancel   context.CancelFunc
	deadline time.Time
	searches []*multiSearch
	sv       *served // the snapshot the targets were resolved from
	leased   map[string]*target
	shares   []*entry // the indexes whose share of the slots is held
	slot     bool
	workers  // search slots beyond the first, for more workers
	ch       charge
	tasks    []*part
	next     atomic.Int64
	stopped  atomic.Pointer[error] // the first error that ends the request
}

// newMultiRun resolves the searches' targets from one snapshot of the
// registry, with a lease on each index. The caller ends the run, whatever
// the error (too many indexes).
func (s *Server) newMultiRun(c *gin.Context, deadline time.Time, searches []*multiSearch) (*multiRun, error) {
	r := &multiRun{s: s, ctx: c.Request.Context(), deadline: deadline, searches: searches, cancel: noCancel}
	lists := make([][]targetExpr, len(searches))
	for i, ms := range searches {
		lists[i] = ms.exprs
	}
	var per [][]*target
	var err error
	if per, r.leased, r.sv, err = s.Reg.leaseTargets(lists); err != nil {
		return r, err
	}
	r.qctx = r.ctx
	for _, t := range r.leased {
		if t.e != nil && t.l.h.readsObjects() {
			r.qctx, r.cancel = context.WithDeadline(r.ctx, deadline)
			break
		}
	}
	for i, ms := range searches {
		for _, t := range per[i] {
			ms.parts = append(ms.parts, &part{t: t, q: ms.req.query(), err: t.missing})
		}
	}
	return r, nil
}

// exec plans every search, takes the index shares, the search slots and
// the work they need, and runs their queries. Its error ends the whole
// request (no slot, too much work, the client gone, a shutdown); a
// search's own failure is its err, an index's its part's.
func (r *multiRun) exec() error {
	for _, ms := range r.searches {
		ms.err = r.plan(ms)
	}
	if err := r.admit(); err != nil {
		return err
	}
	r.run()
	if p := r.stopped.Load(); p != nil {
		return *p
	}
	for _, ms := range r.searches {
		ms.finish()
	}
	return nil
}

// plan checks one search against its indexes and plans its query on each.
func (r *multiRun) plan(ms *multiSearch) error {
	ms.radial = ms.req.MaxDistance.Set || ms.req.MinScore.Set
	var live, missing []*part
	for _, p := range ms.parts {
		if p.err != nil {
			missing = append(missing, p)
		} else {
			live = append(live, p)
		}
	}
	switch {
	case len(live) == 0 && len(missing) > 0:
		return missing[0].err // nothing to search, and a name no index has
	case len(missing) > 0 && (ms.single || !ms.allowPartial()):
		return missing[0].err
	}
	if err := ms.req.checkFilters(func(n string) bool {
		_, ok := slices.BinarySearchFunc(ms.parts, n, func(p *part, n string) int { return strings.Compare(p.t.name, n) })
		return ok
	}); err != nil {
		return err
	}
	if err := agreeOnShape(live); err != nil {
		return err
	}
	req := ms.req
	for _, p := range live {
		h := p.t.l.h
		if err := h.usable(); err != nil {
			if ms.single {
				return err
			}
			p.err = err
			continue
		}
		f := req.filterOf(p.t.name)
		if f != nil && len(f.IDs) == 0 && !ms.single {
			p.skip = true
			continue
		}
		qp, err := r.s.plan(h, req.K, radial{req.MaxDistance, req.MinScore}, req.MethodParameters, f, req.Rescore)
		if err != nil {
			return err
		}
		qp.SetDeadline(r.deadline)
		qp.SetContext(r.qctx)
		p.qp = qp
		ms.k, ms.radial = qp.K(), qp.Radial()
	}
	return nil
}

// agreeOnShape refuses indexes that do not agree on dimension, space type
// and vector type (float or binary): their hits could not be merged. The
// first that differs from the first is named.
func agreeOnShape(live []*part) error {
	type shape struct {
		d      int
		space  string
		binary bool
	}
	of := func(p *part) shape {
		x := p.t.l.h.x
		return shape{x.Dim(), x.Space(), x.Binary()}
	}
	text := func(sh shape) string {
		kind := "float"
		if sh.binary {
			kind = "binary"
		}
		return fmt.Sprintf("d=%d, space_type %s, %s vectors", sh.d, sh.space, kind)
	}
	if len(live) < 2 {
		return nil
	}
	want := of(live[0])
	for _, p := range live[1:] {
		if got := of(p); got != want {
			return badRequest("index %q has %s, index %q has %s: the indexes of one search must agree on dimension, space type and vector type",
				p.t.name, text(got), live[0].t.name, text(want))
		}
	}
	return nil
}

// runnable reports whether p is to be searched.
func (ms *multiSearch) runnable(p *part) bool { return ms.err == nil && p.err == nil && !p.skip }

// admit takes, for the queries to run, each index's share of the search
// slots (entry.adm, in name order, as a search of one index takes it
// before a server slot, so that no two requests wait on each other), then
// a search slot, then their work (the sum of each query's) and, when one
// is heavy, a place in the heavy lane. An index whose share has no room
// fails in every search that names it; no slot, or too much work, fails
// the request.
func (r *multiRun) admit() error {
	var names []string
	for _, ms := range r.searches {
		for _, p := range ms.parts {
			if ms.runnable(p) {
				names = append(names, p.t.name)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	full := map[string]error{}
	for _, n := range names {
		e := r.leased[n].e
		if err := e.adm.enter(r.ctx, r.deadline); err != nil {
			full[n] = err
			continue
		}
		r.shares = append(r.shares, e)
	}
	var work, effort int64
	for _, ms := range r.searches {
		for _, p := range ms.parts {
			if !ms.runnable(p) {
				continue
			}
			if err, ok := full[p.t.name]; ok {
				p.err = err
				continue
			}
			work += p.qp.Work()
			effort = max(effort, p.qp.Effort())
			r.tasks = append(r.tasks, p)
		}
	}
	if len(r.tasks) == 0 {
		return nil
	}
	if err := r.s.adm.enter(r.ctx, r.deadline); err != nil {
		return err
	}
	r.slot = true
	if work > r.s.limits.MaxRequestWork {
		return badRequest("the request's %d queries (over %d indexes) ask for Σ max(k, shortlist or radial cap, ef_search) = %d, above the limit of %d (max_request_work)",
			len(r.tasks), len(names), work, r.s.limits.MaxRequestWork)
	}
	ch, err := r.s.takeWork(r.ctx, work, effort, r.deadline)
	if err != nil {
		return err
	}
	r.ch = ch
	return nil
}

// run answers every task on up to msearchWorkers goroutines (a heavy
// request on one), each with a search slot.
func (r *multiRun) run() {
	if len(r.tasks) > 0 {
		r.workers.run(r.s, len(r.tasks), r.ch.heavy, r.work)
	}
}

// work answers the next task until none is left or the request ends.
func (r *multiRun) work() {
	var sc engine.Scratch
	var vals []float64 // a vector_b64's values
	for {
		i := int(r.next.Add(1) - 1)
		if i >= len(r.tasks) || r.stopped.Load() != nil {
			return
		}
		p := r.tasks[i]
		switch {
		case r.ctx.Err() != nil:
			err := errClientClosed()
			if errors.Is(context.Cause(r.ctx), errShuttingDown) {
				err = errShuttingDown
			}
			r.stop(err)
			return
		case time.Now().After(r.deadline):
			p.err = errTimeout
			continue
		}
		r.answer(p, &sc, &vals)
	}
}

func (r *multiRun) stop(err error) { r.stopped.CompareAndSwap(nil, &err) }

// answer runs p's query, a vector_b64 read into vals for p's index (the
// indexes of a search agree on its shape, but each names itself in the
// error of one that does not fit); a panic fails that index alone.
func (r *multiRun) answer(p *part, sc *engine.Scratch, vals *[]float64) {
	t := p.t
	defer func() {
		if v := recover(); v != nil {
			r.s.log.Error("panic in a search of many indexes", "index", t.name, "panic", fmt.Sprint(v))
			p.err = errInternal()
		}
	}()
	h := t.l.h
	p.start = time.Now()
	vec, buf, err := p.q.values(h, *vals)
	*vals = buf
	var hits []Hit
	var prof Profile
	if err == nil {
		hits, prof, err = h.x.Query(&p.qp, vec, sc)
	}
	p.end = time.Now()
	took := p.end.Sub(p.start)
	if err != nil {
		r.s.queryFailed(t.e, t.l, err)
		switch {
		case errors.Is(err, engine.ErrDeadline):
			err = errTimeout
		case errors.Is(err, errShuttingDown):
			r.stop(errShuttingDown)
		}
		p.err = h.failure(err)
		return
	}
	// The scratch is the next query's: what the answer keeps is copied.
	p.hits = slices.Clone(hits)
	if prof.Rerank != nil {
		fs := *prof.Rerank
		prof.Rerank = &fs
	}
	p.prof = prof
	r.s.queryDone(t.e, t.l, took, 1, &prof)
}

// end gives back what the run holds.
func (r *multiRun) end() {
	r.cancel()
	r.s.uncharge(r.ch)
	r.workers.release(r.s)
	if r.slot {
		r.s.adm.exit()
	}
	for _, e := range r.shares {
		e.adm.exit()
	}
	releaseTargets(r.leased)
}

// finish decides a search's answer once its queries ran: a search of one
// index named as such fails with it; a search of many fails with its
// first failed index (name order) when every index failed or partial
// results are refused.
func (ms *multiSearch) finish() {
	var start, end time.Time
	for _, p := range ms.parts {
		if !p.start.IsZero() && (start.IsZero() || p.start.Before(start)) {
			start = p.start
		}
		if p.end.After(end) {
			end = p.end
		}
	}
	if !start.IsZero() {
		ms.took = end.Sub(start)
	}
	if ms.err != nil {
		return
	}
	var first error
	failed := 0
	for _, p := range ms.parts {
		if p.err != nil {
			failed++
			if first == nil {
				first = p.err
			}
		}
	}
	if failed > 0 && (ms.single || failed == len(ms.parts) || !ms.allowPartial()) {
		ms.err = first
	}
}

// appendAnswer writes the answer of a search that did not fail as a
// whole, without its closing brace: a single index's as its own _search
// answers, else the merged hits of all, with "_shards".
func (ms *multiSearch) appendAnswer(b []byte) ([]byte, error) {
	b = append(b, `{"took":`...)
	b = appendTook(b, ms.took)
	if ms.single {
		p := ms.parts[0]
		return appendResult(append(b, ','), p.hits, &p.prof, ms.radial, ms.req.Profile)
	}
	per := make([][]Hit, len(ms.parts))
	failed, skipped, truncated := 0, 0, false
	for i, p := range ms.parts {
		switch {
		case p.err != nil:
			failed++
		case p.skip:
			skipped++
		default:
			per[i] = p.hits
			truncated = truncated || p.prof.Truncated
		}
	}
	k := ms.k
	if ms.radial {
		k = -1 // every index's hits, then the cap
	}
	merged := engine.MergeHits(nil, per, k)
	if ms.radial && len(merged) > ms.k {
		merged, truncated = merged[:ms.k], true
	}
	b = append(b, `,"_shards":{"total":`...)
	b = strconv.AppendInt(b, int64(len(ms.parts)), 10)
	b = strconv.AppendInt(append(b, `,"successful":`...), int64(len(ms.parts)-failed), 10)
	b = strconv.AppendInt(append(b, `,"skipped":`...), int64(skipped), 10)
	b = strconv.AppendInt(append(b, `,"failed":`...), int64(failed), 10)
	if failed > 0 {
		b = append(b, `,"failures":[`...)
		n := 0
		for _, p := range ms.parts {
			if p.err == nil {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			status, typ := errStatus(p.err)
			b = appendString(append(b, `{"index":`...), p.t.name)
			b = appendString(append(b, `,"reason":{"type":`...), typ)
			b = appendString(append(b, `,"reason":`...), shortReason(p.err.Error()))
			b = strconv.AppendInt(append(b, `},"status":`...), int64(status), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `},"hits":`...)
	b = appendTargetHits(b, merged, ms.parts)
	if ms.radial {
		b = appendTruncated(b, truncated)
	}
	if ms.req.Profile {
		b = append(b, `,"profile":{`...)
		n := 0
		for _, p := range ms.parts {
			if p.err != nil || p.skip {
				continue
			}
			pj, err := json.Marshal(p.prof)
			if err != nil {
				return nil, err
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(append(appendString(b, p.t.name), ':'), pj...)
		}
		b = append(b, '}')
	}
	return b, nil
}

// appendTargetHits writes merged hits as appendHits does, each with its
// index's name first ("_index", OpenSearch's field), quoted once per index.
func appendTargetHits(b []byte, hits []engine.TargetHit, parts []*part) []byte {
	quoted := make([][]byte, len(parts))
	b = append(b, '[')
	for i, h := range hits {
		if i > 0 {
			b = append(b, ',')
		}
		q := quoted[h.Target]
		if q == nil {
			q = appendString(nil, parts[h.Target].t.name)
			quoted[h.Target] = q
		}
		b = append(append(append(b, `{"_index":`...), q...), ',')
		b = append(appendHitFields(b, h.Hit), '}')
	}
	return append(b, ']')
}

// appendString writes s as a JSON string.
func appendString(b []byte, s string) []byte {
	j, _ := json.Marshal(s) // a string always marshals
	return append(b, j...)
}

// searchTargets serves POST /indexes/{targets}/_search: a single index
// named as such as it always has, anything else as a search of many.
func (s *Server) searchTargets(c *gin.Context) {
	if sv := s.Reg.snapshot(); singleIndex(c.Param("name"), &sv) {
		s.search(c)
		return
	}
	s.searchMany(c)
}

// searchMany answers a _search of a target list.
func (s *Server) searchMany(c *gin.Context) {
	req := new(SearchRequest)
	var b body
	if err := s.decode(c, req, &b); err != nil {
		s.fail(c, err)
		return
	}
	defer s.release(&b)
	exprs, err := parseTargets(c.Param("name"))
	if err != nil { // checked by the route already
		s.fail(c, err)
		return
	}
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	ms := &multiSearch{req: req, list: c.Param("name"), exprs: exprs}
	r, err := s.newMultiRun(c, deadline, []*multiSearch{ms})
	defer r.end()
	if err == nil {
		err = r.exec()
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	if ms.err != nil {
		s.fail(c, ms.err)
		return
	}
	out, err := ms.appendAnswer(make([]byte, 0, 256+hitBytes*(ms.k+16)))
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, append(out, "}\n"...))
}

// targeted refuses, with a 400, a request whose target list is not one a
// search may name, before the handler sees it; a single name is held to
// the index-name rules as every other route holds it.
func (s *Server) targeted(h gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		list := c.Param("name")
		var err error
		if list == "_all" || strings.ContainsAny(list, ",*") {
			_, err = parseTargets(list)
		} else {
			err = checkName(list)
		}
		if err != nil {
			s.fail(c, err)
			return
		}
		h(c)
	}
}
