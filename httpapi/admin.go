package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/buildinfo"
)

// root names the service and its build (GET /).
func (s *Server) root(c *gin.Context) {
	sendJSON(c, http.StatusOK, gin.H{"name": buildinfo.Name, "version": buildinfo.Version(), "build": buildinfo.Get()})
}

func (s *Server) health(c *gin.Context) {
	used, hs := s.Reg.usage()
	failed := 0
	for _, h := range hs {
		if h.failed.Load() != nil {
			failed++
		}
	}
	sendJSON(c, http.StatusOK, gin.H{"status": "ok", "version": buildinfo.Version(), "indexes": len(hs), "failed_indexes": failed,
		"memory_used_bytes": used, "memory_budget_bytes": s.Reg.budget})
}

// indexInfo describes one served index (GET /indexes/{name}).
func (s *Server) indexInfo(e *entry, h *handle) gin.H {
	x := h.x
	info := gin.H{
		"name": e.name, "path": h.spec.Path, "mode": h.spec.Mode, "backend": h.spec.Backend,
		"space_type": x.Space(), "semantics": x.Options().Semantics.String(), "kernel": x.Options().Kernel.String(),
		"d": x.Dim(), "ntotal": x.NTotal(), "metric": x.MetricName(), "binary": x.Binary(),
		"ef_search_stored": x.StoredEfSearch(), "ef_search": x.EfSearch(), "resident_bytes": h.resident.Load(),
		"queries_served": e.stats.queries(), "query_errors": e.stats.errors(), "switch_state": e.state.Load(),
		"state": "serving", "aliases": s.Reg.aliasesOf(e.name),
	}
	if p := h.failed.Load(); p != nil {
		info["state"] = "failed"
		info["failure"] = h.failure(*p).Error()
	}
	if le, _ := e.lastErr.Load().(string); le != "" {
		info["last_switch_error"] = le
	}
	p := e.stats.percentiles(0.5, 0.99)
	info["latency_ms"] = gin.H{"p50": p[0], "p99": p[1]}
	if st, ok := x.StorageStats(); ok {
		info["storage"] = st
	}
	if h.spec.VectorsPath != "" { // the separate vector file of a graph written without its vectors
		info["vectors_path"] = h.spec.VectorsPath
	}
	if x.HasRerank() {
		info["rerank"] = gin.H{"vectors_path": h.spec.Rerank.VectorsPath, "strategy": x.RerankStrategy(), "oversample_factor": h.spec.Rerank.OversampleFactor}
	}
	if gi, ok := x.Guide(); ok {
		info["compression"] = gi.Level
		info["guide"] = gi
	}
	if b := e.building.Load(); b != nil {
		info["guide_build"] = gin.H{"done_bytes": b[0], "total_bytes": b[1]}
	}
	if b := x.Spec().MemoryBudget; b > 0 { // set, or on_disk's share of the node's free memory (Registry.room)
		info["memory_budget"] = gin.H{"budget_bytes": b, "set": h.spec.MemoryBudget > 0, "pinned_list_bytes": x.PinnedBytes(),
			"all_lists_pinned": x.AllListsPinned(), "vector_cache": x.VectorCache()}
	}
	return info
}

func (s *Server) listIndexes(c *gin.Context) {
	out := []gin.H{}
	for _, e := range s.Reg.all() {
		if _, l, err := s.Reg.acquire(e.name); err == nil {
			out = append(out, s.indexInfo(e, l.h))
			l.release()
		}
	}
	sendJSON(c, http.StatusOK, gin.H{"indexes": out})
}

func (s *Server) getIndex(c *gin.Context) {
	e, l, err := s.Reg.acquire(c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	defer l.release()
	// A local file is checked at once (a stat); an object is not (a HEAD,
	// which a stalled store would hold for its attempts): its reads are
	// pinned to its ETag and the file watcher checks it.
	if l.h.failed.Load() == nil && !engine.IsRemote(l.h.spec.Path) {
		if err := l.h.checkFile(); isFileChanged(err) {
			l.h.markFailed(err)
		}
	}
	sendJSON(c, http.StatusOK, s.indexInfo(e, l.h))
}

func (s *Server) loadIndex(c *gin.Context) {
	var spec LoadSpec
	var b body
	if err := s.decode(c, &spec, &b); err != nil {
		s.fail(c, err)
		return
	}
	s.release(&b)
	s.extendWrite(c, s.limits.SwitchTimeout)
	name := c.Param("name")
	if err := s.Reg.Load(name, spec); err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("index loaded", "index", name, "path", spec.Path, "mode", spec.Mode, "backend", spec.Backend)
	s.getIndex(c)
}

func (s *Server) deleteIndex(c *gin.Context) {
	name := c.Param("name")
	if err := s.Reg.Delete(name, 0); err != nil { // the handle closes after its last query
		s.fail(c, err)
		return
	}
	s.metrics.forget(name)
	sendJSON(c, http.StatusOK, gin.H{"acknowledged": true, "index": name})
}

func (s *Server) switchMode(c *gin.Context) {
	var sw SwitchSpec
	var b body
	if err := s.decode(c, &sw, &b); err != nil {
		s.fail(c, err)
		return
	}
	s.release(&b)
	s.extendWrite(c, s.limits.SwitchTimeout)
	name := c.Param("name")
	start := time.Now()
	if err := s.Reg.Switch(context.WithoutCancel(c.Request.Context()), name, sw); err != nil {
		// A switch refused before it started (a bad request, no room, one
		// already running) is no failure; one of an index that is not
		// served (any name a client sends, or one deleted meanwhile, whose
		// series are gone) counts nowhere.
		switch status, typ := errStatus(err); {
		case status == http.StatusNotFound && s.Reg.get(name) == nil:
			s.log.Info("mode switch of an index not served", "index", name, "error", err)
		case status == http.StatusBadRequest || status == http.StatusTooManyRequests || typ == "switch_in_progress":
			s.metrics.switches.WithLabelValues(name, "refused").Inc()
			s.log.Info("mode switch refused", "index", name, "error", err)
		default:
			s.metrics.switches.WithLabelValues(name, "failed").Inc()
			s.log.Warn("mode switch failed", "index", name, "error", err)
		}
		s.fail(c, err)
		return
	}
	s.metrics.switches.WithLabelValues(name, "ok").Inc()
	s.log.Info("mode switched", "index", name, "mode", sw.Mode, "backend", sw.Backend, "took", time.Since(start))
	s.getIndex(c)
}

func (s *Server) warmup(c *gin.Context) {
	// _warmup takes no options: an empty body or {}, anything else a 400
	// as every other endpoint answers it.
	var b body
	err := s.read(c, &b)
	if err == nil && len(bytes.TrimSpace(b.buf.b)) > 0 {
		err = decodeJSON(b.buf.b, &struct{}{})
	}
	s.release(&b)
	if err != nil {
		s.fail(c, err)
		return
	}
	e, l, err := s.Reg.acquire(c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	defer l.release()
	h := l.h
	s.extendWrite(c, s.limits.SwitchTimeout)
	// Bounded by switch_timeout, ended by a DELETE of the index (404) or
	// a shutdown (503), not by the client going away.
	ctx, cancel := s.Reg.opContext(context.Background(), e, s.limits.SwitchTimeout)
	defer cancel()
	start := time.Now()
	if err := h.x.WarmContext(ctx); err != nil {
		if ended := opEnded(ctx, errWarmupTimeout); ended != nil {
			s.fail(c, ended)
			return
		}
		if isFileChanged(err) {
			h.markFailed(err)
		}
		s.fail(c, h.failure(err))
		return
	}
	sendJSON(c, http.StatusOK, gin.H{"acknowledged": true, "took_ms": time.Since(start).Milliseconds()})
}

// extendWrite lets a request that may run up to d (loads, switches,
// warm-ups) write its answer after the server's write timeout.
func (s *Server) extendWrite(c *gin.Context, d time.Duration) {
	http.NewResponseController(c.Writer).SetWriteDeadline(time.Now().Add(d + answerGrace))
}
