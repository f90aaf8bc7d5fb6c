package engine

import (
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
)

// Env is what a process decides once for every index it opens, passed
// down in each Spec rather than set process-wide: the S3 client (its
// settings, connections and per-server bound on requests) and the
// instruction set of the distance kernels. The binary builds one at start
// from its flags, config file and environment (cmd/faiss-sidecar) and
// keeps it for its life; a test builds its own. A nil *Env is the zero
// Env: each load an S3 client of its own, AVX-512 where the CPU has it.
type Env struct {
	// S3 opens every s3:// path: the index, its guide's source, its
	// vector files (NewS3Client). nil: a client per open.
	S3 *S3Client
	// NoAVX512 keeps the fast distance kernels (search, rerank, guide
	// builds) and the 16x and 32x guides' popcount on AVX2 where the CPU
	// has AVX-512: the same answers, for machines whose clock AVX-512
	// lowers (FAISS_SIDECAR_NO_AVX512).
	NoAVX512 bool
}

// s3 is e's S3 client (nil: a client per open).
func (e *Env) s3() *s3.Client {
	if e == nil {
		return nil
	}
	return e.S3
}

// avx512 reports whether e lets the kernels use AVX-512.
func (e *Env) avx512() bool { return e == nil || !e.NoAVX512 }

// KernelImpl names the code that computes distances for a kernel name
// (Spec.Kernel) in the indexes opened with e: "sequential" for exact,
// else the fast kernels' code on this CPU ("avx512", "avx2" or "go").
func (e *Env) KernelImpl(kernel string) string {
	if kernel == "exact" {
		return "sequential"
	}
	return distance.Fast(e.avx512()).Impl
}

// S3Client opens the objects of s3:// paths; S3Options are its settings.
type (
	S3Client  = s3.Client
	S3Options = s3.Options
)

// NewS3Client returns a client whose opens take o's non-zero fields as
// their defaults (an endpoint, timeouts, attempts); the AWS configuration
// is read on first use.
func NewS3Client(o S3Options) *S3Client { return s3.NewClient(o) }

// CacheDir is a disk cache directory for s3:// indexes (Spec.CacheDir),
// shared by every index opened with the same value: its budget covers
// them all, and it is locked while one of them is open (or Hold).
type CacheDir = diskcache.Dir

// NewCacheDir is the disk cache directory dir with a budget of budget
// bytes (0: DefaultCacheDirBytes), touched only when an index opens on it
// or it is held (CacheDir.Hold: a server from start).
func NewCacheDir(dir string, budget int64) *CacheDir { return diskcache.NewDir(dir, budget) }
