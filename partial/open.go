package partial

import (
	"fmt"
	"strings"
)

// Backends lists the backend names accepted by Open.
var Backends = []string{"memory", "mmap", "pread", "direct", "zstd"}

// Options configures Open.
type Options struct {
	// Backend is one of Backends, or "" to choose: zstd when the file carries
	// a zstd seek table, pread otherwise.
	Backend string
	// Cache is a shared block cache for pread, direct and zstd; when nil a
	// private cache of CacheBytes is made.
	Cache *Cache
	// CacheBytes is the private cache's budget (default 64 MiB). For direct,
	// 0 means no cache in front and a negative value is an error; pread and
	// zstd always use a cache.
	CacheBytes int64
	// BlockSize is the cache block size for pread and direct (default 4096).
	BlockSize int
}

// DefaultCacheBytes is the private cache budget when none is given.
const DefaultCacheBytes = 64 << 20

// Open opens path with the backend o names.
func Open(path string, o Options) (Storage, error) {
	backend := o.Backend
	if backend == "" || backend == "auto" {
		backend = "pread"
		if ok, err := IsSeekableZstd(path); err != nil {
			return nil, err
		} else if ok {
			backend = "zstd"
		}
	}
	budget := o.CacheBytes
	if budget == 0 && backend != "direct" {
		budget = DefaultCacheBytes
	}
	if budget < 0 {
		return nil, fmt.Errorf("partial: cache budget %d is negative", budget)
	}
	switch backend {
	case "memory":
		return OpenMemory(path)
	case "mmap":
		return OpenMmap(path)
	case "pread":
		f, err := OpenFile(path)
		if err != nil {
			return nil, err
		}
		return NewCached(path, f, o.Cache, budget, o.BlockSize)
	case "direct":
		d, err := OpenDirect(path)
		if err != nil {
			return nil, err
		}
		if o.Cache == nil && budget == 0 {
			return d, nil
		}
		return NewCached(path, d, o.Cache, budget, o.BlockSize)
	case "zstd":
		return OpenZstd(path, o.Cache, budget)
	}
	return nil, fmt.Errorf("partial: unknown backend %q (known: %s)", o.Backend, strings.Join(Backends, ", "))
}
