package httpapi

import (
	"io"
	"log/slog"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// Config configures a Server.
type Config struct {
	DataRoots      []string
	S3Buckets      []string      // buckets whose s3://BUCKET/KEY objects may be served (none: no object)
	MemoryBudget   int64         // bytes for all indexes; 0 = defaultNodeBudget (the machine's memory, or its cgroup's limit, less the server's own)
	GuideDir       string        // on_disk guide files ("": beside each index)
	RemoteGuideDir string        // an s3:// index's guide files when GuideDir is "" (engine.Spec.RemoteGuideDir)
	CacheDir       string        // local disk cache of every s3:// index ("": none; partial/diskcache)
	CacheDirBytes  int64         // its budget (0: engine.DefaultCacheDirBytes)
	Token          string        // bearer token required when not empty
	MaxBodyBytes   int64         // default 16 MiB
	RequestTimeout time.Duration // default 30 s
	Pprof          bool          // serve /debug/pprof (behind the token when one is set)
	Logger         *slog.Logger
	Limits         Limits // bounds on what requests may ask; zero fields take defaults
	// SetMemoryLimit sets the Go runtime's memory limit and returns the
	// one before, as runtime/debug.SetMemoryLimit does: while it serves,
	// the server keeps the limit at what its indexes leave the heap
	// (heapLimit). nil: the server leaves the runtime's limit alone (the
	// binary decides, e.g. not under GOMEMLIMIT).
	SetMemoryLimit func(limit int64) int64
	// Env is the process's S3 client and kernel choice, given to every
	// load (nil: a client of the server's own, the default kernels).
	Env *engine.Env
}

// withDefaults fills the zero fields but the memory budget (nodeBudget)
// for a machine (or memory cgroup) of total bytes (0: unknown).
func (cfg Config) withDefaults(total int64) Config {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if cfg.Limits.MaxOpenFiles <= 0 && cfg.CacheDir != "" { // the disk cache's block files too
		cfg.Limits.MaxOpenFiles = defaultOpenFiles(processFiles(), cfg.Limits.withDefaults(total).MaxConnections, int64(engine.CacheDirFiles()))
	}
	cfg.Limits = cfg.Limits.withDefaults(total)
	return cfg
}

// nodeBudget is the node's memory budget on a machine of total bytes:
// cfg.MemoryBudget, or defaultNodeBudget for none or one beyond what the
// machine has beside the server's own memory (a load beyond it would have
// the server killed, every index with it); a budget cut is logged.
func (cfg Config) nodeBudget(total int64) int64 {
	room := defaultNodeBudget(total)
	if cfg.MemoryBudget != 0 && (room <= 0 || cfg.MemoryBudget <= room) {
		return cfg.MemoryBudget
	}
	if cfg.MemoryBudget != 0 {
		cfg.Logger.Warn("memory_budget is more than this machine can give its indexes; using what it can",
			"memory_budget", cfg.MemoryBudget, "machine_bytes", total, "server_own_bytes", ownBytes(total), "using", room)
	}
	return room
}
