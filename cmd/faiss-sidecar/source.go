package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// backendHelp documents --backend for every subcommand.
var backendHelp = "storage backend: " + strings.Join(storage.Backends, ", ") + " (default: zstd for compressed files, " + storage.DefaultPlainBackend + " otherwise)"

// openSource opens path's raw storage (inspect, bench storage) through the
// named backend ("" = auto); indexes open through the engine.
func openSource(path, backend string, cacheBytes int64) (partial.Storage, error) {
	s, err := storage.Open(path, storage.Options{Backend: backend, CacheBytes: cacheBytes})
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
	case *s3.Object:
		return "s3"
	case *blockcache.Cached:
		switch s.Inner().(type) {
		case *partial.Direct:
			return "direct"
		case *s3.Object:
			return "s3"
		}
		return "pread"
	}
	return fmt.Sprintf("%T", s)
}
