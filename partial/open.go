package partial

import (
	"errors"
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
	// AlignOffset, for backends memory and pread, is the file offset to
	// place on a cache-line boundary in memory (hnswsearch.AlignOffset: the
	// vectors section).
	AlignOffset int64
}

// DefaultCacheBytes is the private cache budget when none is given.
const DefaultCacheBytes = 64 << 20

// ErrBadOption marks a mode or backend choice that cannot be served
// (callers turn it into a usage error or an HTTP 400).
var ErrBadOption = errors.New("partial: bad option")

// ModeBackend resolves a loading mode and an optional backend name to the
// backend that serves them. Mode "full" reads the whole file into memory
// (backend "memory"); "memory_efficient" (also "") reads on demand, by
// default through zstd when the file carries a zstd seek table and mmap
// otherwise.
func ModeBackend(mode, backend, path string) (string, error) {
	switch mode {
	case "full":
		if backend != "" && backend != "memory" {
			return "", fmt.Errorf("%w: mode full reads the whole file into memory; backend %q applies to mode memory_efficient", ErrBadOption, backend)
		}
		return "memory", nil
	case "", "memory_efficient":
		switch {
		case backend == "":
			if ok, _ := IsSeekableZstd(path); ok {
				return "zstd", nil
			}
			return "mmap", nil
		case backend == "memory":
			return "", fmt.Errorf("%w: backend memory is mode full", ErrBadOption)
		case !knownBackend(backend):
			return "", unknownBackend(backend)
		}
		return backend, nil
	}
	return "", fmt.Errorf("%w: unknown mode %q (known: full, memory_efficient)", ErrBadOption, mode)
}

func knownBackend(b string) bool {
	for _, k := range Backends {
		if k == b {
			return true
		}
	}
	return false
}

func unknownBackend(b string) error {
	return fmt.Errorf("%w: unknown backend %q (known: %s)", ErrBadOption, b, strings.Join(Backends, ", "))
}

// CacheBudget is the block-cache budget Open gives backend: CacheBytes, or
// DefaultCacheBytes for pread and zstd when it is 0; 0 for backends without
// a cache (memory, mmap, and direct unless CacheBytes is set).
func (o Options) CacheBudget(backend string) int64 {
	switch {
	case backend == "memory" || backend == "mmap":
		return 0
	case o.CacheBytes == 0 && backend != "direct":
		return DefaultCacheBytes
	}
	return o.CacheBytes
}

// CacheBudgetFor is CacheBudget for a file of size bytes (for zstd, the
// decompressed size: Storage.Size). A private block cache never holds more
// than the file, so a larger budget is capped at what it can ever hold,
// and the memory a load is charged is that (a 70 KB index is not charged
// the 64 MiB default): for zstd the decoded frames, size bytes (OpenZstd
// then never evicts); for pread and direct the blocks, mirrored whole from
// mirrorMinBudget(size) on, two blocks of slack included.
func (o Options) CacheBudgetFor(backend string, size int64) int64 {
	b := o.CacheBudget(backend)
	if o.Cache != nil || b <= 0 {
		return b
	}
	switch backend {
	case "zstd":
		b = min(b, size)
	case "pread", "direct":
		bs := int64(o.BlockSize)
		if bs == 0 {
			bs = 4096
		}
		b = min(b, mirrorMinBudget(size)+2*bs)
	}
	return b
}

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
	budget := o.CacheBudget(backend)
	if budget < 0 {
		return nil, fmt.Errorf("%w: cache budget %d is negative", ErrBadOption, budget)
	}
	switch backend {
	case "memory":
		return OpenMemoryAligned(path, o.AlignOffset)
	case "mmap":
		return OpenMmap(path)
	case "pread":
		f, err := OpenFile(path)
		if err != nil {
			return nil, err
		}
		return NewCachedAligned(path, f, o.Cache, budget, o.BlockSize, o.AlignOffset)
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
	return nil, unknownBackend(o.Backend)
}
