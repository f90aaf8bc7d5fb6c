package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// The backend names, and a file opened as a backend reads it for the
// tools that read a file without serving it (inspect, bench storage):
// what front ends need of partial/storage, so that they reach it through
// the engine.

// Backend names a storage backend (Spec.Backend, RawOptions.Backend):
// partial/storage's names.
type Backend = storage.Backend

// The storage backends (partial/storage).
const (
	BackendMemory = storage.BackendMemory
	BackendMmap   = storage.BackendMmap
	BackendPread  = storage.BackendPread
	BackendDirect = storage.BackendDirect
	BackendZstd   = storage.BackendZstd
	BackendS3     = storage.BackendS3
	// BackendAuto, for OpenRaw, leaves the choice to the file, as "" does.
	BackendAuto = storage.BackendAuto
)

// Backends lists the storage backend names Spec.Backend and OpenRaw take.
func Backends() []Backend { return slices.Clone(storage.Backends) }

// ParseBackend is the backend named s, one of Backends, or an error naming
// them (matching ErrBadStorageOption).
func ParseBackend(s string) (Backend, error) { return storage.ParseBackend(s) }

// DefaultPlainBackend is the backend OpenRaw reads an uncompressed file
// with when none is named (a zstd file: zstd).
const DefaultPlainBackend = storage.DefaultPlainBackend

// CheckBackend checks a backend name for OpenRaw ("" and "auto": chosen
// by the file). Errors match ErrBadStorageOption.
func CheckBackend(b string) error {
	if b == "" || Backend(b) == BackendAuto {
		return nil
	}
	_, err := ParseBackend(b)
	return err
}

// CheckCacheDirBytes checks a disk cache directory's budget (0: the
// default). Errors match ErrBadStorageOption.
func CheckCacheDirBytes(n int64) error { return diskcache.CheckBudget(n) }

// CheckIndexEfSearch is the rule for an index-level ef_search
// (Spec.EfSearch when set): 1 … MaxEfSearch. Errors match ErrBadOption.
func CheckIndexEfSearch(n int) error { return hnswsearch.CheckIndexEfSearch(n) }

// RawOptions says how OpenRaw reads a file.
type RawOptions struct {
	// Backend is one of Backends, or "" (also BackendAuto) for zstd on a
	// zstd file and DefaultPlainBackend otherwise.
	Backend Backend
	// CacheBytes is the block cache budget (0: the backend's default).
	CacheBytes int64
	// CacheDir is an s3:// object's local disk cache (NewCacheDir), nil
	// for none.
	CacheDir *CacheDir
	// Env is the process's choices: the S3 client that opens an s3://
	// path (nil: the defaults).
	Env *Env
}

// OpenRaw opens the file or s3:// object at path as o's backend reads it,
// and names the backend that does (the one chosen for "" or "auto").
// Indexes open through Prepare; this is for the tools that read a file's
// bytes without serving it. Its object-store requests end with ctx.
func OpenRaw(ctx context.Context, path string, o RawOptions) (partial.Storage, Backend, error) {
	s, err := storage.Open(ctx, path, storage.Options{Backend: o.Backend, CacheBytes: o.CacheBytes, CacheDir: o.CacheDir, S3: o.Env.s3()})
	if err != nil {
		return nil, "", err
	}
	return s, backendOf(s), nil
}

// Parse parses the FAISS file st holds (opened from path) as every load
// parses it: headers and small arrays, a graph written without its
// vectors too (faissfmt.File.VectorsMissing). Its reads end with ctx.
func Parse(ctx context.Context, st partial.Storage, path string) (*faissfmt.File, error) {
	return faissfmt.OpenWith(partial.ReaderAt(ctx, st), st.Size(), faissfmt.OpenOptions{AllowNullStorage: true, Window: storage.ParseWindow(path)})
}

// backendOf names the backend a storage storage.Open made is read by.
func backendOf(s partial.Storage) Backend {
	switch s := s.(type) {
	case *partial.Memory:
		return BackendMemory
	case *partial.Mmap:
		return BackendMmap
	case *zstd.File:
		return BackendZstd
	case *partial.Direct:
		return BackendDirect
	case *s3.Object, *diskcache.Cache:
		return BackendS3
	case *blockcache.Cached:
		switch s.Inner().(type) {
		case *partial.Direct:
			return BackendDirect
		case *s3.Object, *diskcache.Cache:
			return BackendS3
		}
		return BackendPread
	}
	return Backend(fmt.Sprintf("%T", s))
}
