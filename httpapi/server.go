package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/sysmem"
)

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
	files           *watcher   // the served files' watcher
	stop            chan struct{}
	closeMu         sync.Once
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	total := sysmem.Total()
	cfg = cfg.withDefaults(total)
	if len(cfg.DataRoots) == 0 && len(cfg.S3Buckets) == 0 {
		return nil, fmt.Errorf("at least one data root (or S3 bucket) is needed")
	}
	cfg.MemoryBudget = cfg.nodeBudget(total)
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
	reg.limits, reg.total = cfg.Limits, total
	reg.guideDir, reg.remoteGuideDir = cfg.GuideDir, cfg.RemoteGuideDir
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
	s.engine = s.routes()
	s.files = newWatcher(s)
	go s.files.run()
	return s, nil
}

// Handler is the API's http.Handler. The per-request timeout is applied by
// ListenAndServe's server (read and write deadlines per request), not by
// http.TimeoutHandler, which runs every request in a second goroutine and
// buffers its response, a cost paid on every search.
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

// answerGrace is how long after its deadline a request may still write its
// answer (a search stopped at request_timeout answers 504 within it).
const answerGrace = 5 * time.Second

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
var errShuttingDown = errUnavailable("shutting_down", "the server is shutting down and cancelled this request at the end of its grace period")
