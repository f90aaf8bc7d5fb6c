package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// backendHelp documents --backend for every subcommand.
var backendHelp = "storage backend: " + strings.Join(storage.Backends, ", ") + " (default: zstd for compressed files, " + storage.DefaultPlainBackend + " otherwise)"

// openSource opens path's raw storage (inspect, bench storage) through the
// named backend ("" = auto), with cd's disk cache for an s3:// path;
// indexes open through the engine.
func openSource(path, backend string, cacheBytes int64, cd cacheDirFlags) (partial.Storage, error) {
	s, err := storage.Open(context.Background(), path, storage.Options{Backend: backend, CacheBytes: cacheBytes, CacheDir: cd.dir, CacheDirBytes: cd.bytes})
	if errors.Is(err, partial.ErrBadOption) {
		return nil, badOption(err)
	}
	return s, err
}

// backendName names the backend a Storage came from.
func backendName(s partial.Storage) string {
	switch s := s.(type) {
	case *partial.Memory:
		return "memory"
	case *partial.Mmap:
		return "mmap"
	case *zstd.File:
		return "zstd"
	case *partial.Direct:
		return "direct"
	case *s3.Object, *diskcache.Cache:
		return "s3"
	case *blockcache.Cached:
		switch s.Inner().(type) {
		case *partial.Direct:
			return "direct"
		case *s3.Object, *diskcache.Cache:
			return "s3"
		}
		return "pread"
	}
	return fmt.Sprintf("%T", s)
}
