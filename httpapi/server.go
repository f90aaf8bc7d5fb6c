// Package httpapi serves FAISS indexes over a REST API (gin): per-index
// loading modes switched live, a node-wide memory budget, search with
// OpenSearch-style scores and per-query profiles, and Prometheus metrics.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// Config configures a Server.
type Config struct {
	DataRoots      []string
	MemoryBudget   int64         // bytes for all indexes; 0 = unlimited
	Token          string        // bearer token required when not empty
	MaxBodyBytes   int64         // default 16 MiB
	RequestTimeout time.Duration // default 30 s
	Pprof          bool          // serve /debug/pprof
	Logger         *slog.Logger
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	Reg     *Registry
	log     *slog.Logger
	engine  *gin.Engine
	metrics *metrics
}

type metrics struct {
	reg      *prometheus.Registry
	resident *prometheus.GaugeVec
	switches *prometheus.CounterVec
	// The per-request metrics are striped counters and histograms
	// (stripes.go), found by label in copy-on-write maps and summed into
	// constant metrics when scraped (Collect): the client library's own
	// keep one shared counter per series, written by every core on every
	// request.
	requestsDesc, latencyDesc, cacheDesc *prometheus.Desc
	byRoute                              cowMap[*cowMap[*counter]]
	byIndex                              cowMap[*indexMetrics]
}

// indexMetrics are one index's per-request metrics.
type indexMetrics struct {
	latency      *histogram
	hits, misses counter
}

// searchBuckets are the search latency histogram's upper bounds: 50 µs to
// 1.6 s, doubling.
var searchBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)

func (m *metrics) index(name string) *indexMetrics {
	return m.byIndex.get(name, func() *indexMetrics { return &indexMetrics{latency: newHistogram(searchBuckets)} })
}

func (m *metrics) request(route, code string) *counter {
	codes := m.byRoute.get(route, func() *cowMap[*counter] { return new(cowMap[*counter]) })
	return codes.get(code, func() *counter { return new(counter) })
}

// Describe is part of prometheus.Collector (the striped metrics).
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.requestsDesc
	ch <- m.latencyDesc
	ch <- m.cacheDesc
}

// Collect sums the striped metrics' stripes.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for route, codes := range m.byRoute.all() {
		for code, c := range codes.all() {
			ch <- prometheus.MustNewConstMetric(m.requestsDesc, prometheus.CounterValue, float64(c.value()), route, code)
		}
	}
	for name, im := range m.byIndex.all() {
		n, sum, cum := im.latency.snapshot()
		ch <- prometheus.MustNewConstHistogram(m.latencyDesc, n, sum, cum, name)
		ch <- prometheus.MustNewConstMetric(m.cacheDesc, prometheus.CounterValue, float64(im.hits.value()), name, "hit")
		ch <- prometheus.MustNewConstMetric(m.cacheDesc, prometheus.CounterValue, float64(im.misses.value()), name, "miss")
	}
}

// cowMap is a copy-on-write map for a small, rarely growing key set: reads
// are an atomic load and a map lookup, writes nothing shared.
type cowMap[V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string]V]
}

// get returns key's value, made by mk on first use.
func (c *cowMap[V]) get(key string, mk func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[key]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[key]; ok {
			return v
		}
	}
	n := make(map[string]V)
	if old != nil {
		maps.Copy(n, *old)
	}
	v := mk()
	n[key] = v
	c.m.Store(&n)
	return v
}

// all is the current map (read-only; nil before the first get).
func (c *cowMap[V]) all() map[string]V {
	if m := c.m.Load(); m != nil {
		return *m
	}
	return nil
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	reg, err := NewRegistry(cfg.DataRoots, cfg.MemoryBudget)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, Reg: reg, log: cfg.Logger, metrics: newMetrics()}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(s.recoverPanics, s.accessLog, s.limits)
	e.GET("/_health", s.health)
	e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
	if cfg.Pprof {
		e.Any("/debug/pprof/*path", gin.WrapF(pprof.Index))
	}
	api := e.Group("/", s.auth)
	api.GET("/indexes", s.listIndexes)
	api.GET("/indexes/:name", s.getIndex)
	api.PUT("/indexes/:name", s.loadIndex)
	api.DELETE("/indexes/:name", s.deleteIndex)
	api.POST("/indexes/:name/_search", s.search)
	api.POST("/indexes/:name/_msearch", s.msearch)
	api.PUT("/indexes/:name/_mode", s.switchMode)
	api.POST("/indexes/:name/_warmup", s.warmup)
	e.NoRoute(func(c *gin.Context) {
		s.fail(c, &apiError{404, "no_route", fmt.Sprintf("no endpoint %s %s", c.Request.Method, c.Request.URL.Path)})
	})
	e.NoMethod(func(c *gin.Context) {
		s.fail(c, &apiError{405, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s", c.Request.Method, c.Request.URL.Path)})
	})
	e.HandleMethodNotAllowed = true
	s.engine = e
	return s, nil
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requestsDesc: prometheus.NewDesc("faiss_sidecar_requests_total",
			"HTTP requests by route and status.", []string{"route", "status"}, nil),
		latencyDesc: prometheus.NewDesc("faiss_sidecar_search_seconds",
			"Search latency by index.", []string{"index"}, nil),
		resident: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "faiss_sidecar_resident_bytes",
			Help: "Bytes each index counts against the memory budget."}, []string{"index"}),
		cacheDesc: prometheus.NewDesc("faiss_sidecar_cache_lookups_total",
			"Block-cache lookups by searches, by index and result.", []string{"index", "result"}, nil),
		switches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faiss_sidecar_mode_switches_total",
			Help: "Mode switches by index and outcome."}, []string{"index", "outcome"}),
	}
	m.reg.MustRegister(m, m.resident, m.switches,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler is the API's http.Handler. The per-request timeout is applied by
// ListenAndServe's server (read and write deadlines per request):
// http.TimeoutHandler ran every request in a second goroutine and buffered
// its response, a cost paid on every search.
func (s *Server) Handler() http.Handler { return s.engine }

// Close unloads every index.
func (s *Server) Close() {
	for n := range s.Reg.all() {
		s.Reg.Delete(n, 5*time.Second)
	}
}

func errorBody(status int, typ, reason string) gin.H {
	return gin.H{"error": gin.H{"type": typ, "reason": reason}, "status": status}
}

// fail writes the one error envelope every failure uses.
func (s *Server) fail(c *gin.Context, err error) {
	status, typ := errStatus(err)
	c.AbortWithStatusJSON(status, errorBody(status, typ, err.Error()))
}

func (s *Server) recoverPanics(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving request", "path", c.Request.URL.Path, "panic", fmt.Sprint(p))
			s.fail(c, &apiError{500, "internal_error", "internal error"})
		}
	}()
	c.Next()
}

func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status := c.Writer.Status()
	code := statusCodes[min(max(status, 0), len(statusCodes)-1)]
	if code == "" {
		code = strconv.Itoa(status)
	}
	s.metrics.request(route, code).add(pickStripe(), 1)
	if s.log.Enabled(c.Request.Context(), slog.LevelDebug) { // its arguments allocate even when off
		s.log.Debug("request", "method", c.Request.Method, "path", c.Request.URL.Path, "status", status, "took", time.Since(start))
	}
}

// statusCodes spells HTTP status codes for metric labels without allocating.
var statusCodes = func() []string {
	t := make([]string, 600)
	for i := 100; i < len(t); i++ {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func (s *Server) limits(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.MaxBodyBytes)
	c.Next()
}

func (s *Server) auth(c *gin.Context) {
	if s.cfg.Token == "" {
		return
	}
	if c.GetHeader("Authorization") != "Bearer "+s.cfg.Token {
		s.fail(c, &apiError{401, "unauthorized", "a valid bearer token is required"})
	}
}

// bodies recycles request body buffers.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decode reads a JSON body strictly: unknown fields and trailing data are
// 400s. Search bodies of the usual shape take a parser without reflection
// (searchFast); everything else, and every error, goes through
// encoding/json.
func decode(c *gin.Context, v any) error {
	buf := bodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 { // a huge _msearch body is not kept
			bodies.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(c.Request.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{413, "body_too_large", fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)}
		}
		return badRequest("reading the request body: %v", err)
	}
	if r, ok := v.(*SearchRequest); ok {
		if searchFast(buf.Bytes(), r) {
			return nil
		}
		*r = SearchRequest{} // forget what the fast parser filled in
	}
	d := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		switch {
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty; JSON expected")
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return badRequest("malformed JSON: %v", err)
	}
	if d.More() {
		return badRequest("malformed JSON: data after the object")
	}
	return nil
}

func (s *Server) health(c *gin.Context) {
	used, hs := s.Reg.usage()
	c.JSON(200, gin.H{"status": "ok", "indexes": len(hs), "memory_used_bytes": used, "memory_budget_bytes": s.Reg.budget})
}

// indexInfo describes one served index (GET /indexes/{name}).
func (s *Server) indexInfo(e *entry, h *handle) gin.H {
	x := h.idx
	info := gin.H{
		"name": e.name, "path": h.spec.Path, "mode": h.spec.Mode, "backend": h.spec.Backend,
		"space_type": h.space, "semantics": x.Options().Semantics.String(), "kernel": x.Options().Kernel.String(),
		"d": x.Dim(), "ntotal": x.NTotal(), "metric": x.Metric().String(), "binary": x.Binary(),
		"ef_search_stored": x.StoredEfSearch(), "resident_bytes": h.resident.Load(),
		"queries_served": e.stats.queries(), "query_errors": e.stats.errors(), "switch_state": e.state.Load(),
	}
	if x.Binary() {
		info["metric"] = "Hamming"
	}
	if le, _ := e.lastErr.Load().(string); le != "" {
		info["last_switch_error"] = le
	}
	p := e.stats.percentiles(0.5, 0.99)
	info["latency_ms"] = gin.H{"p50": p[0], "p99": p[1]}
	if sr, ok := h.st.(partial.StatsReporter); ok {
		info["storage"] = sr.Stats()
	}
	if h.rer != nil {
		info["rerank"] = gin.H{"vectors_path": h.spec.Rerank.VectorsPath, "strategy": h.rer.Strategy()}
	}
	if h.spec.MemoryBudget > 0 {
		info["memory_budget"] = gin.H{"budget_bytes": h.spec.MemoryBudget, "pinned_list_bytes": x.PinnedBytes(),
			"all_lists_pinned": x.Options().PinNeighbors, "vector_cache": x.VectorCache()}
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
	c.JSON(200, gin.H{"indexes": out})
}

func (s *Server) getIndex(c *gin.Context) {
	e, l, err := s.Reg.acquire(c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	defer l.release()
	c.JSON(200, s.indexInfo(e, l.h))
}

func (s *Server) loadIndex(c *gin.Context) {
	var spec LoadSpec
	if err := decode(c, &spec); err != nil {
		s.fail(c, err)
		return
	}
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
	if err := s.Reg.Delete(name, s.cfg.RequestTimeout/2); err != nil {
		s.fail(c, err)
		return
	}
	s.metrics.resident.DeleteLabelValues(name)
	c.JSON(200, gin.H{"acknowledged": true, "index": name})
}

func (s *Server) switchMode(c *gin.Context) {
	var sw SwitchSpec
	if err := decode(c, &sw); err != nil {
		s.fail(c, err)
		return
	}
	name := c.Param("name")
	start := time.Now()
	if err := s.Reg.Switch(name, sw); err != nil {
		s.metrics.switches.WithLabelValues(name, "failed").Inc()
		s.log.Warn("mode switch failed", "index", name, "error", err)
		s.fail(c, err)
		return
	}
	s.metrics.switches.WithLabelValues(name, "ok").Inc()
	s.log.Info("mode switched", "index", name, "mode", sw.Mode, "backend", sw.Backend, "took", time.Since(start))
	s.getIndex(c)
}

func (s *Server) warmup(c *gin.Context) {
	_, l, err := s.Reg.acquire(c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	defer l.release()
	h := l.h
	start := time.Now()
	if err := h.warm(); err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(200, gin.H{"acknowledged": true, "took_ms": time.Since(start).Milliseconds()})
}

// MethodParameters are the HNSW search parameters of a request.
type MethodParameters struct {
	EfSearch int `json:"ef_search"`
}

// IDFilter allows only these external ids.
type IDFilter struct {
	IDs []int64 `json:"ids"`
}

// SearchRequest is the body of POST /indexes/{name}/_search.
type SearchRequest struct {
	Vector           Vector            `json:"vector"`
	K                int               `json:"k"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Rescore          *struct {
		OversampleFactor float64 `json:"oversample_factor"`
	} `json:"rescore"`
	Profile bool `json:"profile"`
}

// Hit is one search result.
type Hit struct {
	ID       int64   `json:"id"`
	Distance float64 `json:"distance"`
	Score    float64 `json:"score"`
}

// bind decodes the body into req and takes a lease on the index the path
// names; on failure it has answered the request and ok is false.
func (s *Server) bind(c *gin.Context, req any) (e *entry, l lease, ok bool) {
	err := decode(c, req)
	if err == nil {
		e, l, err = s.Reg.acquire(c.Param("name"))
	}
	if err != nil {
		s.fail(c, err)
		return nil, lease{}, false
	}
	return e, l, true
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
	e, l, ok := s.bind(c, req)
	if !ok {
		return
	}
	defer l.release()
	h := l.h
	start := time.Now()
	hits, prof, err := s.searchOne(h, req, sc)
	took := time.Since(start)
	if err != nil {
		e.stats.failed(l.stripe)
		s.fail(c, err)
		return
	}
	e.stats.ok(l.stripe, took, 1)
	im := s.metrics.index(e.name)
	im.latency.observe(l.stripe, took)
	if prof.IO.CacheHits > 0 {
		im.hits.add(l.stripe, uint64(prof.IO.CacheHits))
	}
	if prof.IO.CacheMisses > 0 {
		im.misses.add(l.stripe, uint64(prof.IO.CacheMisses))
	}
	buf := respPool.Get().(*[]byte)
	b := appendSearchResponse((*buf)[:0], took, hits)
	if req.Profile {
		pj, err := json.Marshal(prof)
		if err != nil {
			s.fail(c, err)
			return
		}
		b = append(append(b[:len(b)-1], `,"profile":`...), pj...)
		b = append(b, '}')
	}
	writeJSON(c, b)
	*buf = b
	respPool.Put(buf)
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

// appendSearchResponse writes {"took":…,"hits":[{"id","distance","score"}…]}
// directly (encoding/json's reflection over maps cost more than the search
// of a small index). Distances are the shortest text that reads back as the
// same float32.
func appendSearchResponse(b []byte, took time.Duration, hits []Hit) []byte {
	b = append(b, `{"took":`...)
	b = strconv.AppendFloat(b, float64(took.Microseconds())/1000, 'g', -1, 64)
	b = append(b, `,"hits":[`...)
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
	return append(b, "]}"...)
}

// Profile is a query's search statistics and I/O.
type Profile struct {
	hnswsearch.Stats
	Rerank *rerank.FetchStats `json:"rerank,omitempty"`
	Micros float64            `json:"search_us"`
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

// grow returns b[:n], reallocated only when its capacity is short.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// searchOne validates and runs one query on h, in sc's buffers when sc is
// not nil (the hits then live there until sc is reused).
func (s *Server) searchOne(h *handle, req *SearchRequest, sc *queryScratch) ([]Hit, Profile, error) {
	if sc == nil {
		sc = new(queryScratch)
	}
	var prof Profile
	x := h.idx
	if req.K == 0 {
		req.K = 10
	}
	p := hnswsearch.Params{K: req.K}
	if mp := req.MethodParameters; mp != nil {
		if mp.EfSearch <= 0 {
			return nil, prof, badRequest("method_parameters.ef_search must be positive, got %d", mp.EfSearch)
		}
		p.EfSearch = mp.EfSearch
	}
	if req.Filter != nil {
		p.Filter = req.Filter.IDs
		if p.Filter == nil {
			p.Filter = []int64{}
		}
	}
	if req.Vector == nil {
		return nil, prof, badRequest("vector is required")
	}
	want := x.Dim() // components, or bytes (0–255) for a binary index
	if len(req.Vector) != want {
		return nil, prof, badRequest("vector has %d values, index %s expects %d", len(req.Vector), h.spec.Path, want)
	}
	var q []float32
	var qb []byte
	if x.Binary() {
		qb = grow(sc.qb, want)
		sc.qb = qb
		for j, v := range req.Vector {
			if v != math.Trunc(v) || v < 0 || v > 255 {
				return nil, prof, badRequest("binary vector value %d is %v; bytes 0–255 expected", j, v)
			}
			qb[j] = byte(v)
		}
	} else {
		q = grow(sc.q, want)
		sc.q = q
		var norm float64
		for j, v := range req.Vector {
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
	k := req.K
	rescore := h.rer != nil && (req.Rescore == nil || req.Rescore.OversampleFactor >= 0)
	if req.Rescore != nil && h.rer == nil {
		return nil, prof, badRequest("rescore needs an index loaded with rerank.vectors_path")
	}
	if rescore {
		if k < 1 || k > hnswsearch.MaxK {
			return nil, prof, badRequest("k=%d is out of range [1, %d]", k, hnswsearch.MaxK)
		}
		f := h.spec.Rerank.OversampleFactor
		if req.Rescore != nil && req.Rescore.OversampleFactor > 0 {
			f = req.Rescore.OversampleFactor
		}
		if f <= 0 {
			f = rerank.DefaultOversample(h.rer.Dim)
		}
		p.K = rerank.ShortlistSize(k, f)
	}
	t0 := time.Now()
	res := grow(sc.res, p.K)[:0] // the search appends no more
	defer func() { sc.res = res[:0] }()
	var st hnswsearch.Stats
	var err error
	if x.Binary() {
		res, st, err = x.SearchBinary(qb, p, res)
	} else {
		res, st, err = x.Search(q, p, res)
	}
	if err != nil {
		return nil, prof, err
	}
	prof.Stats = st
	if rescore && !x.Binary() {
		labels := make([]int32, 0, len(res))
		for _, r := range res {
			if r.Label >= 0 {
				labels = append(labels, r.Label)
			}
		}
		var fs rerank.FetchStats
		rh, err := h.rer.Rescore(q, labels, k, h.space != "l2", &fs)
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

// MSearchRequest is the body of POST /indexes/{name}/_msearch.
type MSearchRequest struct {
	Vectors          []Vector          `json:"vectors"`
	K                int               `json:"k"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Profile          bool              `json:"profile"`
}

func (s *Server) msearch(c *gin.Context) {
	var req MSearchRequest
	e, l, ok := s.bind(c, &req)
	if !ok {
		return
	}
	defer l.release()
	h := l.h
	if len(req.Vectors) == 0 {
		s.fail(c, badRequest("vectors must hold at least one vector"))
		return
	}
	start := time.Now()
	type one struct {
		Hits    []Hit    `json:"hits"`
		Profile *Profile `json:"profile,omitempty"`
		Error   gin.H    `json:"error,omitempty"`
	}
	out := make([]one, len(req.Vectors))
	done := make(chan struct{})
	work := make(chan int)
	workers := min(len(req.Vectors), 4)
	for range workers {
		go func() {
			for i := range work {
				r := SearchRequest{Vector: req.Vectors[i], K: req.K, MethodParameters: req.MethodParameters, Filter: req.Filter}
				hits, prof, err := s.searchOne(h, &r, nil)
				if err != nil {
					st, typ := errStatus(err)
					out[i].Error = gin.H{"type": typ, "reason": err.Error(), "status": st}
					continue
				}
				out[i].Hits = hits
				if req.Profile {
					out[i].Profile = &prof
				}
			}
			done <- struct{}{}
		}()
	}
	for i := range req.Vectors {
		work <- i
	}
	close(work)
	for range workers {
		<-done
	}
	took := time.Since(start)
	e.stats.ok(l.stripe, took/time.Duration(len(req.Vectors)), int64(len(req.Vectors)))
	c.JSON(200, gin.H{"took": float64(took.Microseconds()) / 1000, "responses": out})
}

// ListenAndServe serves on addr until ctx ends, then shuts down gracefully,
// letting in-flight requests finish (up to grace).
func (s *Server) ListenAndServe(ctx context.Context, addr string, grace time.Duration) error {
	srv := &http.Server{Addr: addr, Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: s.cfg.RequestTimeout, WriteTimeout: s.cfg.RequestTimeout, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	s.log.Info("listening", "addr", addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: finishing in-flight requests", "grace", grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.Close()
	if err != nil {
		s.log.Warn("in-flight requests cut off after the grace period", "grace", grace.String(), "error", err.Error())
	} else {
		s.log.Info("stopped")
	}
	return err
}
