package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/buildinfo"
	"github.com/faiss-sidecar/faiss-sidecar/internal/sysmem"
)

// Config configures a Server.
type Config struct {
	DataRoots      []string
	S3Buckets      []string      // buckets whose s3://BUCKET/KEY objects may be served (none: no object)
	MemoryBudget   int64         // bytes for all indexes; 0 = defaultNodeBudget (the machine's memory, or its cgroup's limit, less the server's own)
	GuideDir       string        // on_disk guide files ("": beside each index)
	CacheDir       string        // local disk cache of every s3:// index ("": none; partial/diskcache)
	CacheDirBytes  int64         // its budget (0: engine.DefaultCacheDirBytes)
	Token          string        // bearer token required when not empty
	MaxBodyBytes   int64         // default 16 MiB
	RequestTimeout time.Duration // default 30 s
	Pprof          bool          // serve /debug/pprof (behind the token when one is set)
	Logger         *slog.Logger
	Limits         Limits // bounds on what requests may ask; zero fields take defaults
	// Env is the process's S3 client and kernel choice, given to every
	// load (nil: a client of the server's own, the default kernels).
	Env *engine.Env
}

// Server is the HTTP API.
type Server struct {
	cfg             Config
	releaseCacheDir func() error // the hold on cfg.CacheDir (engine.CacheDir.Hold)
	total           int64        // the machine's memory, or its cgroup's limit (sysmem.Total; 0: unknown)
	Reg             *Registry
	log             *slog.Logger
	engine          *gin.Engine
	metrics         *metrics
	limits          Limits
	adm             *admission
	heavy           *admission // the heavy searches' lane (Limits.HeavyQueryWork)
	bodyMem         budget     // bytes of request bodies being read or held
	workMem         budget     // work of the searches running
	bearer          []byte     // "Bearer " + token, compared in constant time
	stop            chan struct{}
	closeMu         sync.Once
}

type metrics struct {
	reg      *prometheus.Registry
	switches *prometheus.CounterVec
	// The per-request metrics are striped counters and histograms
	// (stripes.go), found by label in copy-on-write maps and summed into
	// constant metrics when scraped (Collect): the client library's own
	// keep one shared counter per series, written by every core on every
	// request.
	requestsDesc, latencyDesc, cacheDesc *prometheus.Desc
	failedDesc, residentDesc             *prometheus.Desc
	registry                             *Registry
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
	ch <- m.failedDesc
	ch <- m.residentDesc
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
	for name, e := range m.registry.all() {
		failed := 0.0
		if h := e.cur.Load(); h != nil && h.failed.Load() != nil {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(m.failedDesc, prometheus.GaugeValue, failed, name)
		// Read when scraped from what the budget counts (handle.resident),
		// so no load, switch, shrink or growth path has to remember it.
		if h := e.cur.Load(); h != nil {
			ch <- prometheus.MustNewConstMetric(m.residentDesc, prometheus.GaugeValue, float64(h.resident.Load()), name)
		}
	}
}

// forget drops an index's per-index series (DELETE).
func (m *metrics) forget(name string) {
	m.byIndex.remove(name)
	m.switches.DeletePartialMatch(prometheus.Labels{"index": name})
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

// remove drops key.
func (c *cowMap[V]) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old == nil {
		return
	}
	if _, ok := (*old)[key]; !ok {
		return
	}
	n := maps.Clone(*old)
	delete(n, key)
	c.m.Store(&n)
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
	total := sysmem.Total()
	cfg.Limits = cfg.Limits.withDefaults(total)
	if len(cfg.DataRoots) == 0 && len(cfg.S3Buckets) == 0 {
		return nil, fmt.Errorf("at least one data root (or S3 bucket) is needed")
	}
	// No load beyond what the machine has beside the server's own memory:
	// it would be killed, every index with it.
	if room := defaultNodeBudget(total); cfg.MemoryBudget == 0 || (room > 0 && cfg.MemoryBudget > room) {
		if cfg.MemoryBudget != 0 {
			cfg.Logger.Warn("memory_budget is more than this machine can give its indexes; using what it can",
				"memory_budget", cfg.MemoryBudget, "machine_bytes", total, "server_own_bytes", ownBytes(total), "using", room)
		}
		cfg.MemoryBudget = room
	}
	if belowOwn(total) {
		cfg.Logger.Warn("this machine's memory, or its cgroup's limit, is less than the server's own: its indexes get an eighth of it, and under load the server's own pages may be paged in and out",
			"machine_bytes", total, "server_own_bytes", ownBytes(total))
	}
	reg, err := NewRegistry(cfg.DataRoots, cfg.MemoryBudget)
	if err == nil {
		err = reg.allowBuckets(cfg.S3Buckets)
	}
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, total: total, Reg: reg, log: cfg.Logger, limits: cfg.Limits, stop: make(chan struct{}),
		adm:   newAdmission(cfg.Limits.MaxConcurrentSearches, cfg.Limits.MaxQueuedSearches),
		heavy: newAdmission(cfg.Limits.MaxHeavySearches, cfg.Limits.MaxHeavySearches)}
	reg.limits = cfg.Limits
	reg.guideDir = cfg.GuideDir
	reg.cacheDir, reg.env = cfg.CacheDir, cfg.Env
	if reg.env == nil { // every load of the server through one S3 client
		reg.env = &engine.Env{S3: engine.NewS3Client(engine.S3Options{})}
	}
	if cfg.CacheDir != "" { // held for the server's life: another process on it fails at start, not on loads
		reg.cacheOpen = engine.NewCacheDir(cfg.CacheDir, cfg.CacheDirBytes)
		if s.releaseCacheDir, err = reg.cacheOpen.Hold(); err != nil {
			return nil, fmt.Errorf("cache_dir %s: %w", cfg.CacheDir, err)
		}
	}
	s.bodyMem.max, s.workMem.max = cfg.Limits.MaxBodiesInFlight, cfg.Limits.MaxWorkInFlight
	s.metrics = newMetrics(reg)
	if cfg.Token != "" {
		s.bearer = []byte("Bearer " + cfg.Token)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.RedirectTrailingSlash = false // a JSON 404, not an HTML redirect
	e.Use(s.recoverPanics, s.accessLog, s.limitBody)
	for _, m := range []string{"GET", "HEAD"} { // HEAD for probes that only look at the status
		e.Handle(m, "/", s.root)
		e.Handle(m, "/_health", s.health)
		e.Handle(m, "/metrics", gin.WrapH(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
	}
	if cfg.Pprof {
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} { // POST: pprof/symbol
			e.Handle(m, "/debug/pprof/*path", s.auth, pprofHandler)
		}
	}
	api := e.Group("/", s.auth)
	api.GET("/indexes", s.listIndexes)
	api.GET("/indexes/:name", s.named(s.getIndex))
	api.PUT("/indexes/:name", s.named(s.loadIndex))
	api.DELETE("/indexes/:name", s.named(s.deleteIndex))
	api.POST("/indexes/:name/_search", s.named(s.search))
	api.POST("/indexes/:name/_msearch", s.named(s.msearch))
	api.PUT("/indexes/:name/_mode", s.named(s.switchMode))
	api.POST("/indexes/:name/_warmup", s.named(s.warmup))
	e.NoRoute(func(c *gin.Context) {
		s.fail(c, &apiError{404, "no_route", fmt.Sprintf("no endpoint %s %s", c.Request.Method, c.Request.URL.Path)})
	})
	e.NoMethod(func(c *gin.Context) {
		s.fail(c, &apiError{405, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s", c.Request.Method, c.Request.URL.Path)})
	})
	e.HandleMethodNotAllowed = true
	s.engine = e
	go s.watchFiles()
	return s, nil
}

// named refuses, with a 400, a request whose index name is not one an
// index may have, before the handler sees it.
func (s *Server) named(h gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := checkName(c.Param("name")); err != nil {
			s.fail(c, err)
			return
		}
		h(c)
	}
}

// pprofHandler serves every /debug/pprof endpoint: the index, the named
// profiles, and the four that are functions of their own.
func pprofHandler(c *gin.Context) {
	switch strings.TrimPrefix(c.Param("path"), "/") {
	case "cmdline":
		pprof.Cmdline(c.Writer, c.Request)
	case "profile":
		pprof.Profile(c.Writer, c.Request)
	case "symbol":
		pprof.Symbol(c.Writer, c.Request)
	case "trace":
		pprof.Trace(c.Writer, c.Request)
	default:
		pprof.Index(c.Writer, c.Request)
	}
}

// fileCheckInterval is how often served files are compared with what was
// opened (a replaced file is otherwise only seen by the queries' checks).
const fileCheckInterval = time.Second

// watchFiles marks failed every served index whose file changed, until the
// server closes.
//
// Its checks give up when the server closes: a HEAD to a stalled store
// holds the index's handle, which Close would wait for.
func (s *Server) watchFiles() {
	t := time.NewTicker(fileCheckInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for name, e := range s.Reg.all() {
			// Each check on its own: a HEAD to a stalled object store
			// must not hold up the checks of local files.
			if e.checking.CompareAndSwap(false, true) {
				go func() {
					defer e.checking.Store(false)
					s.checkFile(ctx, name, e)
				}()
			}
		}
	}
}

// checkFile compares e's served file with what was opened, marking the
// handle failed when it changed; a check that could not tell (an object
// store that did not answer) is logged and the handle keeps serving.
func (s *Server) checkFile(ctx context.Context, name string, e *entry) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic checking a served file", "index", name, "panic", fmt.Sprint(p))
		}
	}()
	_, l, err := s.Reg.acquire(name)
	if err != nil || l.h.failed.Load() != nil {
		if err == nil {
			l.release()
		}
		return
	}
	defer l.release()
	switch err := l.h.checkFileContext(ctx); {
	case err == nil:
	case ctx.Err() != nil: // the server is closing
	case !isFileChanged(err):
		s.log.Warn("could not check a served file", "index", name, "path", l.h.spec.Path, "error", err.Error())
	case l.h.markFailed(err):
		s.log.Error("index file changed under a served index; searches answer 503 until it is reloaded or switched",
			"index", name, "path", l.h.spec.Path, "error", err.Error(), "detail", changeDetail(err))
	}
}

func newMetrics(reg *Registry) *metrics {
	m := &metrics{
		registry: reg,
		failedDesc: prometheus.NewDesc("faiss_sidecar_index_failed",
			"1 when an index's file changed under it and its searches answer 503 until it is reloaded.", []string{"index"}, nil),
		reg: prometheus.NewRegistry(),
		requestsDesc: prometheus.NewDesc("faiss_sidecar_requests_total",
			"HTTP requests by route and status.", []string{"route", "status"}, nil),
		latencyDesc: prometheus.NewDesc("faiss_sidecar_search_seconds",
			"Search latency by index.", []string{"index"}, nil),
		residentDesc: prometheus.NewDesc("faiss_sidecar_resident_bytes",
			"Bytes each index counts against the memory budget.", []string{"index"}, nil),
		cacheDesc: prometheus.NewDesc("faiss_sidecar_cache_lookups_total",
			"Block-cache lookups by searches, by index and result.", []string{"index", "result"}, nil),
		switches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faiss_sidecar_mode_switches_total",
			Help: "Mode switches by index and outcome."}, []string{"index", "outcome"}),
	}
	m.reg.MustRegister(m, m.switches, newS3Collector(reg),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler is the API's http.Handler. The per-request timeout is applied by
// ListenAndServe's server (read and write deadlines per request):
// http.TimeoutHandler ran every request in a second goroutine and buffered
// its response, a cost paid on every search.
func (s *Server) Handler() http.Handler { return s.engine }

// MemoryBudget is the node's memory budget in force (Config.MemoryBudget,
// or the machine's memory for 0).
func (s *Server) MemoryBudget() int64 { return s.Reg.budget }

// Close unloads every index and releases the cache directory.
func (s *Server) Close() {
	s.closeMu.Do(func() { close(s.stop) })
	for n := range s.Reg.all() {
		s.Reg.Delete(n, 5*time.Second)
	}
	if s.releaseCacheDir != nil {
		s.releaseCacheDir()
	}
}

func errorBody(status int, typ, reason string) gin.H {
	return gin.H{"error": gin.H{"type": typ, "reason": reason}, "status": status}
}

// fail writes the one error envelope every failure uses.
func (s *Server) fail(c *gin.Context, err error) {
	status, typ := errStatus(err)
	setRetryAfter(c.Writer, err)
	c.Abort()
	reason := err.Error()
	if r, ok := engine.ObjectStoreReason(err); ok && status == 502 {
		// The client reads what failed in a sentence; the log keeps the
		// request and the SDK's error.
		s.log.Warn("object store request failed", "path", c.Request.URL.Path, "error", err)
		reason = r
	}
	sendJSON(c, status, errorBody(status, typ, shortReason(reason)))
}

// maxReason is the longest error reason sent: encoding/json quotes the
// offending text, which a body can make megabytes long.
const maxReason = 1024

// shortReason cuts a reason longer than maxReason, saying how long it was.
func shortReason(r string) string {
	if len(r) <= maxReason {
		return r
	}
	return strings.ToValidUTF8(r[:maxReason], "") + fmt.Sprintf("… (%d bytes in all)", len(r))
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

// adminBodyBytes bounds the bodies of the requests that are not searches
// (loads, switches): small JSON objects, read before any admission
// control, so a flood of large ones cannot hold max_body_bytes each.
const adminBodyBytes = 64 << 10

// limitBody refuses at once a body announced over its route's limit
// (bodyLimit), and bounds the body's reads by it. A body that will not be
// read (too large, or sent to a route that takes none) closes the
// connection after the answer: otherwise net/http reads what is left of
// it before answering, to reuse the connection, and a client that waits
// for the answer before sending the body gets it only at the read timeout.
func (s *Server) limitBody(c *gin.Context) {
	limit := s.bodyLimit(c)
	if n := c.Request.ContentLength; n > limit {
		c.Header("Connection", "close")
		s.fail(c, &apiError{413, "body_too_large", fmt.Sprintf("request body of %d bytes exceeds %d bytes", n, limit)})
		return
	}
	if c.Request.ContentLength != 0 && !readsBody(c) {
		c.Header("Connection", "close")
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	c.Next()
}

// readsBody reports whether c's route reads a request body.
func readsBody(c *gin.Context) bool {
	switch c.FullPath() {
	case "/indexes/:name":
		return c.Request.Method == http.MethodPut
	case "/indexes/:name/_mode", "/indexes/:name/_search", "/indexes/:name/_msearch":
		return true
	}
	return false
}

// bodyLimit is the largest body c's route takes.
func (s *Server) bodyLimit(c *gin.Context) int64 {
	if r := c.FullPath(); strings.HasSuffix(r, "/_search") || strings.HasSuffix(r, "/_msearch") {
		return s.cfg.MaxBodyBytes
	}
	return min(s.cfg.MaxBodyBytes, adminBodyBytes)
}

func (s *Server) auth(c *gin.Context) {
	if s.cfg.Token == "" {
		return
	}
	if subtle.ConstantTimeCompare([]byte(c.GetHeader("Authorization")), s.bearer) != 1 {
		s.fail(c, &apiError{401, "unauthorized", "a valid bearer token is required"})
	}
}

// bodies recycles request body buffers.
var bodies = sync.Pool{New: func() any { return new(bodyBuf) }}

// bodyBuf is a pooled request body buffer.
type bodyBuf struct{ b []byte }

// maxPooledBody is the largest body buffer kept for reuse: a huge _msearch
// body's is left to the collector.
const maxPooledBody = 1 << 20

// body is a request's body while it is charged to the bodies in flight,
// then what decoding it made (the vectors); Server.release gives both back.
type body struct {
	buf  *bodyBuf
	held int64
}

// release gives b's bytes back to the budget and its buffer to the pool.
func (s *Server) release(b *body) {
	s.bodyMem.give(b.held)
	b.held = 0
	s.dropBuf(b)
}

// dropBuf returns b's buffer to the pool (or to the collector).
func (s *Server) dropBuf(b *body) {
	if b.buf != nil && cap(b.buf.b) <= maxPooledBody {
		bodies.Put(b.buf)
	}
	b.buf = nil
}

// Request bodies are read and charged to the bodies-in-flight budget in
// steps: the first of firstBodyStep bytes, each next one twice the last up
// to bodyChunk, none past the announced length (+1, to see its end). A
// slow client is charged about what it has sent (a step ahead at most),
// not a whole chunk per connection: 1,025 connections that each sent one
// byte of a 100-byte body used to hold all 64 MiB and shed every other
// request.
const (
	firstBodyStep = 4 << 10
	bodyChunk     = 64 << 10
)

// errBodiesBusy sheds a request whose body would take the bodies being
// read past max_bodies_in_flight.
var errBodiesBusy = &apiError{429, "too_many_requests", "too many request bodies being read at once; retry later"}

// decode reads a JSON body strictly: unknown fields and trailing data are
// 400s. The body is read before any search slot is taken (a slow client
// holds about the bytes it has sent, charged to max_bodies_in_flight).
// Once decoded, the body is dropped and what decoding made (the vectors,
// often larger than their text: "0," is 8 bytes as a float64) is charged
// in its place until the caller releases b (on error, decode has).
// Search bodies of the usual shape take a parser without reflection
// (searchFast, msearchFast); everything else, and every error, goes
// through encoding/json.
func (s *Server) decode(c *gin.Context, v any, b *body) error {
	err := s.read(c, b)
	var bound int64 // what decoding may make, charged while it runs
	if err == nil {
		bound, err = s.chargeDecode(v, b)
	}
	if err == nil {
		raw := b.buf.b
		switch r := v.(type) {
		case *SearchRequest:
			if !searchFast(raw, r) {
				*r = SearchRequest{Vector: r.Vector[:0]} // forget what the fast parser filled in
				err = decodeJSON(raw, v)
			}
		case *MSearchRequest:
			if !msearchFast(raw, r) {
				*r = MSearchRequest{}
				err = decodeJSON(raw, v)
			}
		default:
			err = decodeJSON(raw, v)
		}
	}
	if err != nil {
		s.bodyMem.give(bound)
		s.release(b)
		return err
	}
	// The body goes; what decoding made stays charged, as it is (the
	// bound's estimate of the slices' capacities can be short of append's
	// doubling).
	made := decodedBytes(v)
	s.bodyMem.give(b.held + bound - made)
	b.held = made
	s.dropBuf(b)
	return nil
}

// chargeDecode charges, before a search body is decoded, a bound on what
// decoding it makes: a vector per '[' at most (its slice header) and a
// value per ',' or '[' at most (8 bytes each). Decoding a body of tiny
// vectors ("[0],") made 10 to 15 times its size before anything counted
// it (an outside attack had a 512 MiB server killed by one 16 MiB
// _msearch); an _msearch with more arrays than max_msearch_vectors (and
// its own and a filter's) allow is refused before it is decoded. The body
// (b, read) stays while it decodes: a request whose body and bound together
// exceed max_bodies_in_flight could never be decoded, even alone, and is a
// 413, not a 429 to retry for ever; one that fits only without its buffer's
// slack (a chunked body's buffer grows by doubling) is moved to a buffer of
// its size first.
func (s *Server) chargeDecode(v any, b *body) (int64, error) {
	raw := b.buf.b
	_, multi := v.(*MSearchRequest)
	if _, single := v.(*SearchRequest); !single && !multi {
		return 0, nil
	}
	arrays := int64(bytes.Count(raw, []byte{'['}))
	if multi && arrays > int64(s.limits.MaxMsearchVectors)+2 {
		return 0, badRequest("_msearch has more than %d vectors (max_msearch_vectors): the body holds %d arrays", s.limits.MaxMsearchVectors, arrays)
	}
	bound := arrays*vectorHeader + (arrays+int64(bytes.Count(raw, []byte{','})))*valueBytes
	size := int64(len(raw))
	if size+bound <= s.bodyMem.max && b.held+bound > s.bodyMem.max {
		exact := &bodyBuf{b: make([]byte, size)}
		copy(exact.b, raw)
		s.dropBuf(b)
		b.buf = exact
		s.bodyMem.give(b.held - size)
		b.held = size
	}
	switch {
	case size+bound > s.bodyMem.max:
		return 0, &apiError{413, "request_too_large", fmt.Sprintf(
			"the request's vectors may take %d bytes once decoded, beside its %d-byte body: more than max_bodies_in_flight (%d)", bound, size, s.bodyMem.max)}
	case !s.bodyMem.take(bound):
		return 0, errBodiesBusy
	}
	return bound, nil
}

// The sizes decoding makes: a vector's slice header, and a vector's value
// (a filter's id takes as much).
const (
	vectorHeader = int64(unsafe.Sizeof(Vector{}))
	valueBytes   = int64(unsafe.Sizeof(Vector{}[0]))
)

// decodedBytes is what a decoded request body holds beyond its struct:
// its vectors and filter ids.
func decodedBytes(v any) int64 {
	ids := func(f *IDFilter) int64 {
		if f == nil {
			return 0
		}
		return int64(cap(f.IDs)) * int64(unsafe.Sizeof(f.IDs[0]))
	}
	switch r := v.(type) {
	case *SearchRequest:
		return int64(cap(r.Vector))*valueBytes + ids(r.Filter)
	case *MSearchRequest:
		n := int64(cap(r.Vectors)) * vectorHeader
		for _, x := range r.Vectors {
			n += int64(cap(x)) * valueBytes
		}
		return n + ids(r.Filter)
	}
	return 0
}

// read reads c's body into b, charging the buffer's size to the bodies in
// flight as it grows. A body refused before its end (too large, too many
// in flight, too slow) closes the connection after the answer, as
// limitBody says why.
func (s *Server) read(c *gin.Context, b *body) (err error) {
	defer func() {
		if err != nil {
			c.Header("Connection", "close")
		}
	}()
	cl := c.Request.ContentLength // −1: not announced (chunked)
	if cl > 0 && strings.EqualFold(c.GetHeader("Expect"), "100-continue") && !s.bodyMem.fits(cl) {
		// The client waits for a go-ahead before sending: shed it now, and
		// it sends nothing, rather than midway, when the connection must
		// close on a body still arriving (a reset, not an answer, for a
		// client busy sending).
		return errBodiesBusy
	}
	// A pooled buffer is charged whole, so one is taken only when it is at
	// most twice what this body needs (a slow client must not hold a large
	// buffer for its few bytes).
	b.buf = bodies.Get().(*bodyBuf)
	fit := int64(firstBodyStep) // a body of unknown length
	if cl >= 0 {
		fit = cl + 1
	}
	if int64(cap(b.buf.b)) > 2*fit {
		bodies.Put(b.buf)
		b.buf = new(bodyBuf)
	}
	if !s.bodyMem.take(int64(cap(b.buf.b))) {
		return errBodiesBusy
	}
	b.held = int64(cap(b.buf.b))
	buf := b.buf.b[:0]
	defer func() { b.buf.b = buf }()
	start, rc := time.Now(), http.NewResponseController(c.Writer)
	end := start.Add(s.cfg.RequestTimeout) // the server's own read deadline, about
	var slow bool                          // the last read's deadline was min_body_rate's
	// Once the body is in, no read deadline, as net/http leaves it: its
	// background read (watching for the client going away) starts at the
	// body's end, and a deadline passing while the handler runs would fail
	// it and cancel the request (a 499 where a search answers 504).
	defer func() {
		if err == nil {
			_ = rc.SetReadDeadline(time.Time{})
		}
	}()
	for step := firstBodyStep; ; step = min(2*step, bodyChunk) {
		if cl >= 0 {
			step = min(step, int(max(cl-int64(len(buf)), 0))+1)
		}
		// The bytes so far and this step are due at the body rate, after
		// a first second (bodyGrace).
		due := start.Add(bodyGrace + time.Duration(float64(len(buf)+step)/float64(s.limits.MinBodyRate)*float64(time.Second)))
		if slow = due.Before(end); slow {
			_ = rc.SetReadDeadline(due)
		} else {
			_ = rc.SetReadDeadline(end)
		}
		if len(buf)+step > cap(buf) {
			// Grow by doubling, never past the announced length (+1): the
			// buffer is what is charged, and it ends up the body's size.
			size := max(2*cap(buf), len(buf)+step, firstBodyStep)
			if cl >= 0 {
				size = min(size, int(cl)+1) // still ≥ len+step: step ≤ cl−len+1
			}
			if !s.bodyMem.take(int64(size - cap(buf))) {
				return errBodiesBusy
			}
			b.held += int64(size - cap(buf))
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			buf = grown
		}
		n, err := io.ReadFull(c.Request.Body, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return nil
		case err != nil:
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return &apiError{413, "body_too_large", fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)}
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				if slow {
					return &apiError{408, "request_timeout", fmt.Sprintf("the request body arrived slower than %d bytes a second (min_body_rate; %d bytes in %v)",
						s.limits.MinBodyRate, len(buf), time.Since(start).Round(time.Millisecond))}
				}
				return &apiError{408, "request_timeout", "the request body did not arrive within the request timeout"}
			}
			return badRequest("reading the request body: %v", err)
		}
	}
}

// decodeJSON is encoding/json with unknown fields, keys in another case
// than their field's, a key given twice and anything after the value
// refused.
func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		switch {
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty; JSON expected")
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return badRequest("%s", decodeErrorText(err))
	}
	// Decoder.More is false before a stray '}' or ']': look at the bytes.
	if rest := bytes.TrimLeft(b[d.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return badRequest("invalid JSON: data after the object at byte %d", d.InputOffset())
	}
	// Keys are case-sensitive and given once, as OpenSearch reads them;
	// encoding/json matched "K" to k and kept the last of two.
	// A null where an object or a list is required is refused too, as
	// OpenSearch does: encoding/json took it for the field left out.
	var ke *KeyError
	switch err := checkBody(b, v); {
	case errors.As(err, &ke):
		if ke.Duplicate {
			return &apiError{400, "duplicate_field", ke.Error()}
		}
		return badRequest("%v", ke)
	case err != nil:
		return badRequest("%v", err)
	}
	return nil
}

// root names the service and its build (GET /).
func (s *Server) root(c *gin.Context) {
	sendJSON(c, 200, gin.H{"name": buildinfo.Name, "version": buildinfo.Version(), "build": buildinfo.Get()})
}

func (s *Server) health(c *gin.Context) {
	used, hs := s.Reg.usage()
	failed := 0
	for _, h := range hs {
		if h.failed.Load() != nil {
			failed++
		}
	}
	sendJSON(c, 200, gin.H{"status": "ok", "version": buildinfo.Version(), "indexes": len(hs), "failed_indexes": failed,
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
		"state": "serving",
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
		gi.Path, gi.Rebuilt, gi.NotSaved = rename(gi.Path, h.names), rename(gi.Rebuilt, h.names), rename(gi.NotSaved, h.names)
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
	sendJSON(c, 200, gin.H{"indexes": out})
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
	sendJSON(c, 200, s.indexInfo(e, l.h))
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
	sendJSON(c, 200, gin.H{"acknowledged": true, "index": name})
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
		case status == 404 && s.Reg.get(name) == nil:
			s.log.Info("mode switch of an index not served", "index", name, "error", err)
		case status == 400 || status == 429 || typ == "switch_in_progress":
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
	sendJSON(c, 200, gin.H{"acknowledged": true, "took_ms": time.Since(start).Milliseconds()})
}

// bind decodes the body into req and takes a lease on the index the path
// names; on failure it has answered the request and ok is false.
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
		s.fail(c, notFound(c.Param("name")))
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

// bodyGrace is how long a request body may take before min_body_rate
// applies to it.
const bodyGrace = time.Second

// answerGrace is how long after its deadline a request may still write its
// answer (a search stopped at request_timeout answers 504 within it).
const answerGrace = 5 * time.Second

// extendWrite lets a request that may run up to d (loads, switches,
// warm-ups) write its answer after the server's write timeout.
func (s *Server) extendWrite(c *gin.Context, d time.Duration) {
	http.NewResponseController(c.Writer).SetWriteDeadline(time.Now().Add(d + answerGrace))
}

// ListenAndServe serves on addr until ctx ends, then shuts down gracefully,
// letting in-flight requests finish (up to grace).
func (s *Server) ListenAndServe(ctx context.Context, addr string, grace time.Duration) error {
	ln, lerr := net.Listen("tcp", addr)
	if lerr != nil {
		return lerr
	}
	return s.Serve(ctx, ln, grace)
}

// Serve is ListenAndServe on a listener already bound (serve binds before
// it loads anything, so a busy port fails at once); it closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	addr := ln.Addr().String()
	lim := newConnLimiter(ln, s.limits.MaxConnections)
	// Every request's context derives from base: cancelling it at the end
	// of the grace period ends the reads in-flight requests wait on (a
	// stalled object store), so they answer and the server stops.
	base, cancelBase := context.WithCancelCause(context.Background())
	defer cancelBase(nil)
	s.Reg.base.Store(&base) // loads, switches and warm-ups end with it too
	srv := &http.Server{Addr: addr, Handler: lim.closeForWaiting(s.Handler()), ConnState: lim.connState,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: s.cfg.RequestTimeout,
		WriteTimeout: s.cfg.RequestTimeout + answerGrace, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return base }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lim) }()
	go s.limitHeap()
	s.log.Info("listening", "addr", addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: finishing in-flight requests", "grace", grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// The grace period is over: cancel what is still running, give
		// the handlers a moment to answer, then close their connections.
		s.log.Warn("in-flight requests cancelled at the end of the grace period", "grace", grace.String())
		cancelBase(errShuttingDown)
		wctx, wcancel := context.WithTimeout(context.Background(), shutdownAnswer)
		err = srv.Shutdown(wctx)
		wcancel()
		if err != nil {
			srv.Close()
		}
	}
	s.Close()
	s.log.Info("stopped")
	return nil
}

// shutdownAnswer is how long requests cancelled at the end of a shutdown's
// grace period have to answer before their connections close.
const shutdownAnswer = time.Second

// errShuttingDown is the cause of requests cancelled at the end of a
// shutdown's grace period.
var errShuttingDown = &apiError{503, "shutting_down", "the server is shutting down and cancelled this request at the end of its grace period"}
