package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/httpapi"
	"github.com/faiss-sidecar/faiss-sidecar/internal/buildinfo"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

//go:embed demo/demo.faiss
var demoIndex []byte

// serveContext ends when the server should shut down (tests replace it).
var serveContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// serveConfig is the config file (JSON); flags and FAISS_SIDECAR_* variables override it.
type serveConfig struct {
	Listen         string                      `json:"listen"`
	DataRoots      []string                    `json:"data_roots"`
	S3Buckets      []string                    `json:"s3_buckets"`
	MemoryBudget   int64                       `json:"memory_budget"`
	GuideDir       string                      `json:"guide_dir"`
	CacheDir       string                      `json:"cache_dir"`
	CacheDirBytes  int64                       `json:"cache_dir_bytes"`
	Token          string                      `json:"token"`
	MaxBodyBytes   int64                       `json:"max_body_bytes"`
	RequestTimeout string                      `json:"request_timeout"`
	Pprof          bool                        `json:"pprof"`
	LogLevel       string                      `json:"log_level"`
	Indexes        map[string]httpapi.LoadSpec `json:"indexes"`
	// Aliases (alias → its indexes) are set once the indexes are loaded.
	Aliases map[string][]string `json:"aliases"`
	// Request limits (max_ef_search, max_msearch_vectors, max_request_work,
	// max_concurrent_searches, max_queued_searches, max_verify_queries).
	httpapi.Limits
	SwitchTimeout string `json:"switch_timeout"`
	// FileLeases (default true) takes read leases on served files, making
	// the per-query check that a file is unchanged nearly free; false
	// checks with an fstat per query instead (partial.SetFileLeases says
	// what a lease does to writers).
	FileLeases *bool `json:"file_leases"`
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func runServe(args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	cfg, rootsFrom, err := f.config()
	if err != nil {
		return err
	}
	log, reqTimeout, err := cfg.check(rootsFrom, stderr)
	if err != nil {
		return err
	}
	if cfg.FileLeases != nil {
		partial.SetFileLeases(*cfg.FileLeases)
	}
	// Bind before anything is loaded or printed: a busy port fails at once.
	ln, err := listenOn(cfg.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	// Nothing configured: serve the embedded demo index from a temporary root.
	useDemo := f.demo || (len(cfg.DataRoots) == 0 && len(cfg.S3Buckets) == 0 && len(cfg.Indexes) == 0)
	if useDemo {
		release, err := cfg.addDemo()
		if err != nil {
			return err
		}
		defer release()
	}
	srv, err := httpapi.New(httpapi.Config{DataRoots: cfg.DataRoots, S3Buckets: cfg.S3Buckets, MemoryBudget: cfg.MemoryBudget,
		GuideDir: cfg.GuideDir, RemoteGuideDir: defaultRemoteGuideDir(), CacheDir: cfg.CacheDir, CacheDirBytes: cfg.CacheDirBytes, Token: cfg.Token,
		MaxBodyBytes: cfg.MaxBodyBytes, RequestTimeout: reqTimeout, Pprof: cfg.Pprof, Logger: log, Limits: cfg.Limits,
		SetMemoryLimit: processSettings(), Env: procEnv})
	if err != nil {
		return err
	}
	if err := cfg.loadIndexes(srv, log); err != nil {
		return err
	}
	if useDemo {
		fmt.Fprintf(stderr, "serving the demo index: curl -s http://%s/indexes/demo; curl -s -XPOST http://%s/indexes/demo/_search -d '{\"vector\":[%s],\"k\":3}'\n",
			cfg.Listen, cfg.Listen, strings.TrimSuffix(strings.Repeat("0.5,", 20), ","))
	}
	ctx, stop := serveContext()
	defer stop()
	if err := srv.Serve(ctx, ln, 20*time.Second); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

// processSettings makes the process-wide settings, which are the
// binary's: gin's mode, and the runtime's memory limit, which the server
// keeps at what its indexes leave the heap unless GOMEMLIMIT sets one
// (the returned setter for httpapi.Config.SetMemoryLimit; nil then).
func processSettings() (setMemoryLimit func(int64) int64) {
	gin.SetMode(gin.ReleaseMode)
	if os.Getenv("GOMEMLIMIT") == "" {
		setMemoryLimit = debug.SetMemoryLimit
	}
	return setMemoryLimit
}

// serveFlags are serve's flags, which override the config file and the
// environment.
type serveFlags struct {
	configPath, listen, guideDir, token, logLevel string
	roots, buckets                                stringList
	budget                                        budgetFlag // not -1 for "unset": --help would show "(default -1)"
	cd                                            cacheDirFlags
	maxBody                                       int64
	timeout                                       time.Duration
	pprof, demo                                   bool
}

// parseServeFlags reads serve's flags and checks their values.
func parseServeFlags(args []string) (*serveFlags, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := new(serveFlags)
	fs.StringVar(&f.configPath, "config", "", "JSON config file (listen, data_roots, memory_budget, token, indexes, …)")
	fs.StringVar(&f.listen, "listen", "", "address to listen on (default 127.0.0.1:8080; env FAISS_SIDECAR_LISTEN)")
	fs.Var(&f.roots, "data-root", "directory index paths must resolve into (repeatable; env FAISS_SIDECAR_DATA_ROOT, colon-separated)")
	fs.Var(&f.buckets, "s3-bucket", "S3 bucket whose objects (s3://BUCKET/KEY) may be served (repeatable; none: no object)")
	fs.Var(&f.budget, "memory-budget", "`bytes` all indexes may hold: full copies, guides, caches, small arrays (default: memory_budget in --config, else env FAISS_SIDECAR_MEMORY_BUDGET, else 0; 0: the machine's memory, or its cgroup's limit, less the server's own)")
	fs.StringVar(&f.guideDir, "guide-dir", "", "directory for on_disk indexes' guide files (default: beside each index)")
	f.cd.register(fs)
	fs.StringVar(&f.token, "token", "", "bearer token required by /indexes endpoints (env FAISS_SIDECAR_TOKEN)")
	fs.Int64Var(&f.maxBody, "max-body-bytes", 0, "request body limit (default 16 MiB)")
	fs.DurationVar(&f.timeout, "request-timeout", 0, "per-request timeout (default 30s)")
	fs.BoolVar(&f.pprof, "pprof", false, "serve /debug/pprof")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default info)")
	fs.BoolVar(&f.demo, "demo", false, "also serve the embedded demo index as \"demo\" (the default when nothing else is configured)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if err := checkArgs("serve", pos); err != nil {
		return nil, err
	}
	switch {
	case f.budget.n < 0:
		return nil, usagef("--memory-budget %d is negative (0: the machine's memory less the server's own)", f.budget.n)
	case f.maxBody < 0:
		return nil, usagef("--max-body-bytes %d is negative", f.maxBody)
	case f.timeout < 0:
		return nil, usagef("--request-timeout %v is negative", f.timeout)
	}
	return f, nil
}

// config is the server's configuration: the config file, the
// FAISS_SIDECAR_* variables over it, the flags over both. rootsFrom says
// where the data roots came from, for the error that refuses one.
func (f *serveFlags) config() (cfg serveConfig, rootsFrom string, err error) {
	if f.configPath != "" {
		if cfg, err = readServeConfig(f.configPath); err != nil {
			return cfg, "", err
		}
	}
	if v := os.Getenv("FAISS_SIDECAR_LISTEN"); v != "" {
		cfg.Listen = v
	}
	rootsFrom = "data_roots in " + f.configPath
	if v := os.Getenv("FAISS_SIDECAR_DATA_ROOT"); v != "" {
		cfg.DataRoots, rootsFrom = strings.Split(v, ":"), "FAISS_SIDECAR_DATA_ROOT"
	}
	if v := os.Getenv("FAISS_SIDECAR_MEMORY_BUDGET"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return cfg, "", usagef("FAISS_SIDECAR_MEMORY_BUDGET=%q is not a byte count", v)
		}
		cfg.MemoryBudget = n
	}
	if v := os.Getenv("FAISS_SIDECAR_TOKEN"); v != "" {
		cfg.Token = v
	}
	if f.listen != "" {
		cfg.Listen = f.listen
	}
	if len(f.roots) > 0 {
		cfg.DataRoots, rootsFrom = f.roots, "--data-root"
	}
	if len(f.buckets) > 0 {
		cfg.S3Buckets = f.buckets
	}
	if f.budget.set {
		cfg.MemoryBudget = f.budget.n
	}
	if f.token != "" {
		cfg.Token = f.token
	}
	if f.guideDir != "" {
		cfg.GuideDir = f.guideDir
	}
	if f.cd.dir != "" {
		cfg.CacheDir = f.cd.dir
	}
	if f.cd.bytes != 0 {
		cfg.CacheDirBytes = f.cd.bytes
	}
	if f.maxBody > 0 {
		cfg.MaxBodyBytes = f.maxBody
	}
	if f.timeout > 0 {
		cfg.RequestTimeout = f.timeout.String()
	}
	cfg.Pprof = cfg.Pprof || f.pprof
	if f.logLevel != "" {
		cfg.LogLevel = f.logLevel
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:8080"
	}
	return cfg, rootsFrom, nil
}

// readServeConfig reads the config file at path. One that does not parse
// (an unknown key, a wrong type) is a usage error, as a bad flag is.
func readServeConfig(path string) (serveConfig, error) {
	var cfg serveConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&cfg); err != nil {
		return cfg, usagef("%s: %v", path, err)
	}
	if d.More() {
		return cfg, usagef("%s: more than one JSON value", path)
	}
	// Keys exactly as documented, each once (encoding/json takes "Token"
	// for token, and the last of two).
	if err := httpapi.CheckKeys(b, &cfg); err != nil {
		return cfg, usagef("%s: %v", path, err)
	}
	return cfg, nil
}

// check checks the configuration before anything starts (an empty root
// would serve the working directory, a file or a missing directory would
// refuse every load of a server that looked up) and makes its logger,
// writing to stderr, and its request timeout (0: httpapi's default).
func (cfg *serveConfig) check(rootsFrom string, stderr io.Writer) (*slog.Logger, time.Duration, error) {
	for _, root := range cfg.DataRoots {
		if err := httpapi.CheckDataRoot(root); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", rootsFrom, err)
		}
	}
	for _, b := range cfg.S3Buckets {
		if err := engine.CheckS3Bucket(b); err != nil {
			return nil, 0, usagef("--s3-bucket / s3_buckets: %v", err)
		}
	}
	if err := engine.CheckCacheDirBytes(cfg.CacheDirBytes); err != nil {
		return nil, 0, badOption(err)
	}
	if err := checkListen(cfg.Listen); err != nil {
		return nil, 0, err
	}
	if err := checkGuideDir(cfg.GuideDir); err != nil {
		return nil, 0, err
	}
	switch {
	case cfg.MemoryBudget < 0:
		return nil, 0, usagef("memory_budget %d is negative (0: the machine's memory less the server's own)", cfg.MemoryBudget)
	case cfg.MaxBodyBytes < 0:
		return nil, 0, usagef("max_body_bytes %d is negative", cfg.MaxBodyBytes)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(orDefault(cfg.LogLevel, "info"))); err != nil {
		return nil, 0, usagef("log level %q: %v", cfg.LogLevel, err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	var reqTimeout time.Duration
	if cfg.RequestTimeout != "" {
		var err error
		if reqTimeout, err = time.ParseDuration(cfg.RequestTimeout); err != nil {
			return nil, 0, usagef("request_timeout %q: %v", cfg.RequestTimeout, err)
		}
		if reqTimeout < 0 {
			return nil, 0, usagef("request_timeout %q is negative", cfg.RequestTimeout)
		}
	}
	if err := cfg.Limits.Check(); err != nil {
		return nil, 0, usagef("%v", err)
	}
	if cfg.SwitchTimeout != "" {
		var err error
		if cfg.Limits.SwitchTimeout, err = time.ParseDuration(cfg.SwitchTimeout); err != nil || cfg.Limits.SwitchTimeout < 0 {
			return nil, 0, usagef("switch_timeout %q: a positive duration such as 5m is expected", cfg.SwitchTimeout)
		}
	}
	return log, reqTimeout, nil
}

// addDemo writes the embedded demo index into a temporary data root and
// configures it as the index "demo"; release removes the root.
func (cfg *serveConfig) addDemo() (release func(), err error) {
	dir, release, err := makeDemoDir()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "demo.faiss"), demoIndex, 0o444); err != nil {
		release()
		return nil, err
	}
	cfg.DataRoots = append(cfg.DataRoots, dir)
	if cfg.Indexes == nil {
		cfg.Indexes = map[string]httpapi.LoadSpec{}
	}
	// Relative to the demo's root when it is the only one: what GET and
	// errors show is then not the server's temporary path.
	path := filepath.Join(dir, "demo.faiss")
	if len(cfg.DataRoots) == 1 {
		path = "demo.faiss"
	}
	cfg.Indexes["demo"] = httpapi.LoadSpec{Path: path, Mode: engine.ModeFull}
	return release, nil
}

// loadIndexes logs the start and loads the configured indexes, in name
// order.
func (cfg *serveConfig) loadIndexes(srv *httpapi.Server, log *slog.Logger) error {
	names := make([]string, 0, len(cfg.Indexes))
	for n := range cfg.Indexes {
		names = append(names, n)
	}
	sort.Strings(names)
	log.Info("starting", "version", buildinfo.Version(), "listen", cfg.Listen, "data_roots", cfg.DataRoots, "s3_buckets", cfg.S3Buckets,
		"memory_budget", srv.MemoryBudget(), "token_set", cfg.Token != "", "indexes", names)
	for _, n := range names {
		if err := srv.Reg.Load(n, cfg.Indexes[n]); err != nil {
			return fmt.Errorf("index %s: %w", n, err)
		}
		log.Info("index loaded", "index", n, "path", cfg.Indexes[n].Path)
	}
	if len(cfg.Aliases) > 0 {
		var acts []httpapi.AliasAction
		for _, a := range slices.Sorted(maps.Keys(cfg.Aliases)) {
			acts = append(acts, httpapi.AliasAction{Add: &httpapi.AliasSpec{Indices: cfg.Aliases[a], Alias: a}})
		}
		if _, err := srv.Reg.UpdateAliases(acts); err != nil {
			return fmt.Errorf("aliases: %w", err)
		}
		log.Info("aliases set", "aliases", cfg.Aliases)
	}
	return nil
}

// checkListen checks a listen address (host:port, host may be empty) before
// anything starts, so a typo is a usage error rather than a failed bind.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("listen address %q: %v", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usagef("listen address %q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// listenOn binds addr, saying which address could not be bound and why.
func listenOn(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	switch {
	case err == nil:
		return ln, nil
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("cannot listen on %s: the address is in use (another server? stop it or choose another --listen)", addr)
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("cannot listen on %s: permission denied (ports below 1024 need privileges; choose another --listen)", addr)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return nil, fmt.Errorf("cannot listen on %s: %v", addr, err)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// runHealth checks a running server (for container health checks).
func runHealth(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080/_health", "health endpoint")
	wait := fs.Duration("wait", 0, "keep asking until the server is healthy or this `duration` (such as 10s) has passed, for a server just started (default: ask once)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("health", pos); err != nil {
		return err
	}
	if u, err := neturl.Parse(*url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--url %q is not an http:// or https:// URL", *url)
	}
	if *wait < 0 {
		return usagef("--wait %v is negative", *wait)
	}
	deadline := time.Now().Add(*wait)
	for {
		body, err := askHealth(*url, min(3*time.Second, max(time.Until(deadline), 100*time.Millisecond)))
		if err == nil {
			fmt.Fprintln(stdout, body)
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			if *wait > 0 {
				return fmt.Errorf("not healthy after %v: %w", *wait, err)
			}
			return err
		}
		time.Sleep(min(left, 100*time.Millisecond))
	}
}

// askHealth asks url once, within timeout, for a 200 and its body.
func askHealth(url string, timeout time.Duration) (string, error) {
	c := &http.Client{Timeout: timeout}
	r, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 {
		return "", fmt.Errorf("%s: HTTP %d: %s", url, r.StatusCode, strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), nil
}
