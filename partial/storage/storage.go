package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// Backend names how Open reads a file: its spelling in flags, load specs
// and answers.
type Backend string

// The backends Open reads a file with.
const (
	BackendMemory Backend = "memory" // the whole file read into memory
	BackendMmap   Backend = "mmap"   // a read-only mapping
	BackendPread  Backend = "pread"  // pread behind a block cache
	BackendDirect Backend = "direct" // direct I/O, a block cache when given a budget
	BackendZstd   Backend = "zstd"   // a seekable zstd file, frames decoded into a block cache
	BackendS3     Backend = "s3"     // an s3:// object behind a block cache
	// BackendAuto, like "", leaves the choice to the file (AutoBackend);
	// it is not one of Backends.
	BackendAuto Backend = "auto"
)

// Backends lists the backend names accepted by Open.
var Backends = []Backend{BackendMemory, BackendMmap, BackendPread, BackendDirect, BackendZstd, BackendS3}

// IsRemote reports whether path names an object in S3-compatible storage
// (s3://BUCKET/KEY), served by backend s3 rather than from a local file.
func IsRemote(path string) bool { return s3.IsURL(path) }

// Options configures Open.
type Options struct {
	// Backend is one of Backends, or "" (also BackendAuto) to choose by
	// AutoBackend(path, DefaultPlainBackend): zstd when the file carries a
	// zstd seek table, pread otherwise.
	Backend Backend
	// Cache is a shared block cache for pread, direct and zstd; when nil a
	// private cache of CacheBytes is made.
	Cache *blockcache.Cache
	// CacheBytes is the private cache's budget (default 64 MiB). For direct,
	// 0 means no cache in front and a negative value is an error; pread and
	// zstd always use a cache.
	CacheBytes int64
	// BlockSize is the cache block size for pread and direct (default 4096).
	BlockSize int
	// DirectParallel is how many reads backend direct keeps in flight in a
	// batch (0: partial.DefaultDirectParallel); fixed for the storage's life.
	DirectParallel int
	// AlignOffset, for backends memory and pread, is the file offset to
	// place on a cache-line boundary in memory (hnswsearch.AlignOffset: the
	// vectors section).
	AlignOffset int64
	// CacheDir, for an s3:// path read on demand, is a local disk cache
	// (partial/diskcache) between the block cache and the object: blocks
	// fetched once are kept there, across restarts, within its budget for
	// all objects in the directory (shared by every storage given the same
	// Dir). Ignored for local files, for backend memory (a whole download)
	// and when its path is "", but for its budget's check.
	CacheDir *diskcache.Dir
	// Object, for an s3:// path read on demand, is its object already
	// open (by a probe of the same path): the stack is built on it rather
	// than opening it again. Open owns it: closing the storage, or Open
	// failing, closes it, unless KeepObject is set (a probe's storage,
	// whose object another storage is then built on).
	Object     *s3.Object
	KeepObject bool
	// File, for a local path, is the file already open (a partial.Handle
	// its caller probed it through): the backend is built on it rather
	// than opening the path again, and an unnamed backend is chosen by
	// what it holds. It goes by the name it was opened with (Name is for
	// a path Open opens). Open owns it: the storage takes it over, and
	// Open failing closes it.
	File *partial.Handle
	// Name is what the storage's errors call a local file ("": its path):
	// the name its caller knows it by (partial.Named).
	Name string
	// S3 opens an s3:// path (nil: a client of the open's own, see
	// s3.Client.Open).
	S3 *s3.Client
}

// keptObject is an object whose Close leaves it open (Options.KeepObject).
type keptObject struct{ *s3.Object }

func (keptObject) Close() error { return nil }

// CacheAs is the backend whose cache budget rule (Options.CacheBudget,
// CacheBudgetFor) applies to path opened with backend: the backend itself
// for a local file; for an s3:// object "s3" (a block cache in front of
// the object, whatever file backend is named), but "direct" when named
// (its budget 0 is the object alone: the memory budget policy reads its
// misses in batches, which the object sends as parallel GETs) and
// "memory" (a whole download).
func CacheAs(path string, backend Backend) Backend {
	if !IsRemote(path) || backend == BackendDirect || backend == BackendMemory {
		return backend
	}
	return BackendS3
}

// ParseWindow is the faissfmt.OpenOptions.Window for a file at path: for
// an s3:// object, where every read is a round trip, 256 MiB (an HNSW
// index's levels and offsets in one GET up to about 21 million vectors);
// 0 for a local file, which streams them.
func ParseWindow(path string) int64 {
	if IsRemote(path) {
		return 256 << 20
	}
	return 0
}

// DefaultCacheBytes is the private cache budget when none is given.
const DefaultCacheBytes = 64 << 20

// AutoBackend is the one rule for a backend left unnamed: zstd when the
// file carries a zstd seek table, plain otherwise. Open's own default
// (Options.Backend "") is AutoBackend(path, DefaultPlainBackend); a caller
// with another plain default passes its own.
//
// An s3:// path is always backend s3.
func AutoBackend(path string, plain Backend) (Backend, error) {
	if IsRemote(path) {
		return BackendS3, nil
	}
	ok, err := zstd.IsSeekable(path)
	if err != nil {
		return "", err
	}
	if ok {
		return BackendZstd, nil
	}
	return plain, nil
}

// DefaultPlainBackend is the backend Open picks for an uncompressed file
// when none is named.
const DefaultPlainBackend = BackendPread

// ParseBackend is the backend named s, one of Backends, or an error naming
// them (matching partial.ErrBadOption). "" and "auto" are not names of a
// backend: a caller that leaves the choice to the file checks for them
// first.
func ParseBackend(s string) (Backend, error) {
	if !slices.Contains(Backends, Backend(s)) {
		names := make([]string, len(Backends))
		for i, b := range Backends {
			names[i] = string(b)
		}
		return "", partial.BadOptionf("unknown backend %q (known: %s)", s, strings.Join(names, ", "))
	}
	return Backend(s), nil
}

// CacheBudget is the block-cache budget Open gives backend: CacheBytes, or
// DefaultCacheBytes for pread and zstd when it is 0; 0 for backends without
// a cache (memory, mmap, and direct unless CacheBytes is set).
func (o Options) CacheBudget(backend Backend) int64 {
	switch {
	case backend == BackendMemory || backend == BackendMmap:
		return 0
	case o.CacheBytes == 0 && backend != BackendDirect:
		return DefaultCacheBytes
	}
	return o.CacheBytes
}

// CacheBudgetFor is CacheBudget for a file of size bytes (for zstd, the
// decompressed size: Storage.Size). A private block cache never holds more
// than the file, so a larger budget is capped at what it can ever hold,
// and the memory a load is charged is that (a 70 KB index is not charged
// the 64 MiB default): for zstd the decoded frames, size bytes (zstd.Open
// then never evicts); for pread and direct the blocks, mirrored whole from
// blockcache.MirrorBudget(size) on, two blocks of slack included.
func (o Options) CacheBudgetFor(backend Backend, size int64) int64 {
	b := o.CacheBudget(backend)
	if o.Cache != nil || b <= 0 {
		return b
	}
	switch backend {
	case BackendZstd:
		b = min(b, size)
	case BackendPread, BackendDirect, BackendS3:
		bs := int64(o.BlockSize)
		if bs == 0 {
			bs = 4096
			if backend == BackendS3 {
				bs = int64(o.remoteBlockSize())
			}
		}
		b = min(b, blockcache.MirrorBudget(size)+2*bs)
	}
	return b
}

// Open opens path with the backend o names.
//
// An s3:// path is read by the s3 backend (partial/s3) behind a block cache
// of o's budget, whatever file backend is named (pread, mmap, direct: they
// mean nothing for an object), with blocks of s3.DefaultBlockSize unless
// o.BlockSize is set; named direct, with no cache budget, it is the object
// alone, as direct is the file alone; backend memory downloads it whole
// (s3.OpenMemory). With o.CacheDir, a disk cache (partial/diskcache) of
// blocks of max(block size, s3.DefaultBlockSize) sits between the block
// cache and the object, and the block cache's blocks are 4096 bytes unless
// o.BlockSize is set (remoteBlockSize).
// Backend s3 refuses a local path, and zstd is not served from S3 yet.
// The requests Open makes to an object store give up when ctx ends.
func Open(ctx context.Context, path string, o Options) (_ partial.Storage, err error) {
	h := o.File
	defer func() {
		if err != nil && h != nil {
			h.Close() // Open owns it (a backend that took it over left it empty)
		}
	}()
	if o.CacheDir != nil {
		if err := diskcache.CheckBudget(o.CacheDir.Budget()); err != nil {
			return nil, err
		}
	}
	if IsRemote(path) {
		return openRemote(ctx, path, o)
	}
	named, name := partial.Named(o.Name), partial.NameOf(path, partial.Named(o.Name))
	if o.Backend == BackendS3 {
		return nil, fmt.Errorf("%w: backend s3 reads s3://BUCKET/KEY paths; %s is a local path", partial.ErrBadOption, name)
	}
	backend := o.Backend
	switch {
	case backend == "" || backend == BackendAuto:
		if h == nil {
			if h, err = partial.OpenHandle(path, named); err != nil {
				return nil, err
			}
		}
		backend = DefaultPlainBackend
		if zstd.IsSeekableAt(h, h.Size()) {
			backend = BackendZstd
		}
	default:
		if _, err := ParseBackend(string(backend)); err != nil {
			return nil, err
		}
	}
	budget := o.CacheBudget(backend)
	if budget < 0 {
		return nil, fmt.Errorf("%w: cache budget %d is negative", partial.ErrBadOption, budget)
	}
	if h == nil {
		if h, err = partial.OpenHandle(path, named); err != nil {
			return nil, err
		}
	}
	name = h.Name() // a File given goes by the name it was opened with
	switch backend {
	case BackendMemory:
		return partial.ReadMemory(h, o.AlignOffset)
	case BackendMmap:
		return partial.NewMmap(h)
	case BackendPread:
		f, err := partial.NewFile(h)
		if err != nil {
			return nil, err
		}
		return blockcache.NewCachedAligned(name, f, o.Cache, budget, o.BlockSize, o.AlignOffset)
	case BackendDirect:
		d, err := partial.NewDirect(h, o.DirectParallel)
		if err != nil {
			return nil, err
		}
		if o.Cache == nil && budget == 0 {
			return d, nil
		}
		return blockcache.NewCached(name, d, o.Cache, budget, o.BlockSize)
	}
	f, err := partial.NewFile(h) // zstd
	if err != nil {
		return nil, err
	}
	return zstd.New(f, name, o.Cache, budget)
}

// remoteBlockSize is the block cache's block size for an s3:// path:
// BlockSize when set; else s3.DefaultBlockSize (each miss is a GET), or,
// over a disk cache (whose blocks are s3.DefaultBlockSize), 4096 as for a
// local file: a miss is then a local read of the chunks it needs.
func (o Options) remoteBlockSize() int {
	switch {
	case o.BlockSize != 0:
		return o.BlockSize
	case o.diskCache() != nil:
		return 4096
	}
	return s3.DefaultBlockSize
}

// diskCache is o's disk cache directory, nil for none.
func (o Options) diskCache() *diskcache.Dir {
	if o.CacheDir == nil || o.CacheDir.Path() == "" {
		return nil
	}
	return o.CacheDir
}

// openRemote opens an s3:// path (see Open).
func openRemote(ctx context.Context, path string, o Options) (_ partial.Storage, err error) {
	if o.Object != nil && !o.KeepObject {
		defer func() {
			if err != nil {
				o.Object.Close() // Open owns it (closed twice is harmless)
			}
		}()
	}
	backend := o.Backend
	switch backend {
	case BackendMemory:
		if o.Object != nil && !o.KeepObject {
			o.Object.Close() // a whole download opens its own
		}
		return o.S3.OpenMemory(ctx, path, o.AlignOffset, s3.Options{})
	case BackendZstd:
		return nil, fmt.Errorf("%w: backend zstd does not read from S3 yet (%s)", partial.ErrBadOption, path)
	case "", BackendAuto, BackendS3, BackendPread, BackendMmap, BackendDirect:
	default:
		if _, err := ParseBackend(string(backend)); err != nil {
			return nil, err
		}
	}
	budget := o.CacheBudget(CacheAs(path, backend))
	if budget < 0 {
		return nil, fmt.Errorf("%w: cache budget %d is negative", partial.ErrBadOption, budget)
	}
	bs := o.remoteBlockSize()
	obj := o.Object
	if obj == nil {
		if obj, err = o.S3.Open(ctx, path, s3.Options{}); err != nil {
			return nil, err
		}
	}
	var inner partial.Storage = obj
	var dobj diskcache.Object = obj
	if o.KeepObject {
		inner, dobj = keptObject{obj}, keptObject{obj}
	}
	if o.diskCache() != nil {
		dc, err := diskcache.Open(dobj, diskcache.Options{Dir: o.CacheDir, BlockSize: max(bs, s3.DefaultBlockSize)})
		if err != nil {
			inner.Close()
			return nil, err
		}
		inner = dc
	}
	if o.Cache == nil && budget == 0 {
		return inner, nil
	}
	c, err := blockcache.NewCachedAligned(path, inner, o.Cache, budget, bs, o.AlignOffset)
	if err != nil {
		inner.Close()
		return nil, err
	}
	return c, nil
}
