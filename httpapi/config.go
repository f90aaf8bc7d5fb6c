package httpapi

import (
	"log/slog"
	"time"
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
}
