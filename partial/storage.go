package partial

import (
	"context"
	"errors"

	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// Storage is read-only random access to one file's bytes.
//
// ReadAtContext reads len(p) bytes at off into p or returns an error: it
// never returns a short read with a nil error, and a range past Size fails
// with an error wrapping io.ErrUnexpectedEOF (io.EOF when off == Size and
// len(p) > 0). It adds the read's I/O to t when t is not nil. ctx must not
// be nil: a read that can block (a device, an object store, a wait for
// another reader's fill) gives up when ctx ends, before and between its
// blocking steps and in its retries and backoffs, with an error wrapping
// context.Cause(ctx); a read already handed to a local device is waited
// for. Only a backend whose bytes are in memory (a Viewer) may ignore ctx.
//
// All methods are safe for concurrent use. Close may be called while
// reads are in flight: they finish safely, later calls fail with an error
// wrapping ErrClosed, and a second Close returns ErrClosed. ReaderAt gives
// a Storage to code that takes an io.ReaderAt.
type Storage interface {
	ReadAtContext(ctx context.Context, p []byte, off int64, t *Tally) (int, error)
	Size() int64
	Close() error
}

// Viewer is implemented by backends whose bytes are addressable (memory,
// mmap): View returns the bytes without copying.
//
// Views are valid only between Acquire and the matching Release: Close does
// not free or unmap memory while any Acquire is outstanding, it only makes
// new Acquire calls fail with ErrClosed; the last Release frees it. A
// search pins once per query, so the cost is one atomic add per query.
type Viewer interface {
	Acquire() error
	Release()
	// View returns the n bytes at off; the caller must hold an Acquire and
	// must not modify them.
	View(off, n int64) ([]byte, error)
}

// ReadReq is one range of a batch.
type ReadReq struct {
	Off int64
	Buf []byte // filled completely, or Err is set
	Err error
	IO  Tally // this request's I/O
	// ToEOF lets the read stop at the file's end without an error, Buf's
	// bytes past it unspecified: a request of whole aligned blocks
	// for O_DIRECT covering the file's last one. Direct and File honour
	// it; the other backends read Buf whole or fail.
	ToEOF bool
}

// BatchReader is implemented by backends that serve many ranges in
// parallel (direct, pread, an object store and the caches over them):
// ReadBatch fills every request, returning the first error (each request
// also carries its own). When ctx ends, the requests not yet read fail
// with an error wrapping context.Cause(ctx), as in Storage.ReadAtContext.
type BatchReader interface {
	ReadBatch(ctx context.Context, reqs []ReadReq) error
}

// Stats is a snapshot of a backend's I/O accounting.
type Stats struct {
	Requests       int64 `json:"requests"`        // reads and View calls
	BytesRequested int64 `json:"bytes_requested"` // bytes asked for by callers
	ReadCalls      int64 `json:"read_calls"`      // read system calls issued
	BytesRead      int64 `json:"bytes_read"`      // bytes read from the OS (alignment and blocks included)
	CacheHits      int64 `json:"cache_hits"`
	CacheMisses    int64 `json:"cache_misses"`
	CacheEvictions int64 `json:"cache_evictions"`
	ResidentBytes  int64 `json:"resident_bytes"` // heap held: full copy, cache blocks, buffers
	// Tiers splits the reads of an object served through a local disk
	// cache (partial/diskcache) by the tier that answered; nil otherwise.
	Tiers *TierStats `json:"tiers,omitempty"`
}

// TierStats counts where a remote object's block reads were served: from
// the block cache in memory, from the local disk cache, or from the object
// store (cold). Counts are block lookups (a memory view counts as one);
// bytes are the blocks' (a view's own bytes for a view).
type TierStats struct {
	MemoryHits  int64 `json:"memory_hits"`
	MemoryBytes int64 `json:"memory_bytes"`
	DiskHits    int64 `json:"disk_hits"`
	DiskBytes   int64 `json:"disk_bytes"`
	// ColdReads counts blocks fetched from the object store for a caller
	// (callers waiting on one fetch count once each); the requests that
	// fetched them are Stats.ReadCalls.
	ColdReads int64 `json:"cold_reads"`
	ColdBytes int64 `json:"cold_bytes"`
	// DiskCorrupt counts blocks found damaged on disk (checksum, header,
	// length), dropped and fetched again: never served.
	DiskCorrupt int64 `json:"disk_corrupt"`
	// DiskWriteErrors counts blocks that could not be written to the cache
	// directory (a full or read-only disk): served, not cached.
	DiskWriteErrors int64 `json:"disk_write_errors"`
	// The disk cache directory's blocks now (every object in it) and its
	// budget.
	DiskUsedBytes   int64 `json:"disk_used_bytes"`
	DiskBudgetBytes int64 `json:"disk_budget_bytes"`
}

// StatsReporter is implemented by every backend in this package.
type StatsReporter interface {
	Stats() Stats
}

// ErrClosed is returned by operations on a closed Storage.
var ErrClosed = backendkit.ErrClosed

// ErrBadOption marks an option a backend or cache cannot serve (callers
// turn it into a usage error or an HTTP 400).
var ErrBadOption = errors.New("bad option")

// Tally accumulates one caller's I/O (e.g. one query's); not safe for
// concurrent use.
type Tally struct {
	CacheHits   int64 `json:"cache_hits"`
	CacheMisses int64 `json:"cache_misses"`
	DeviceReads int64 `json:"device_reads"` // read system calls issued for this caller
	DeviceBytes int64 `json:"device_bytes"` // bytes those calls read (blocks, alignment included)
	// Blocks (and their bytes) a local disk cache served, and blocks it
	// fetched from the object store, for this caller (see TierStats); only
	// an object behind a disk cache counts them.
	DiskHits  int64 `json:"disk_hits,omitempty"`
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	ColdReads int64 `json:"cold_reads,omitempty"`
	ColdBytes int64 `json:"cold_bytes,omitempty"`
	// Views and bytes served by ViewBlock and CopyCached, not yet added to
	// the backend's statistics (BlockViewer.Account).
	views, viewBytes int64
}

// CountLookup counts one cache lookup by a caching backend; a miss costs
// one device read of n bytes. A nil Tally counts nothing.
func (t *Tally) CountLookup(hit bool, n int64) {
	switch {
	case t == nil:
	case hit:
		t.CacheHits++
	default:
		t.CacheMisses++
		t.DeviceReads++
		t.DeviceBytes += n
	}
}

// CountView counts a BlockViewer's view (or copy) of n cached bytes as a
// hit, and keeps it for TakeViews.
func (t *Tally) CountView(n int64) {
	t.CacheHits++
	t.views++
	t.viewBytes += n
}

// Add adds u's counts to t (a query summing its batch requests' tallies);
// views not yet taken stay with u.
func (t *Tally) Add(u *Tally) {
	t.CacheHits += u.CacheHits
	t.CacheMisses += u.CacheMisses
	t.DeviceReads += u.DeviceReads
	t.DeviceBytes += u.DeviceBytes
	t.AddTiers(u)
}

// AddTiers adds u's tier counts (DiskHits, ColdReads and their bytes) to
// t, and nothing else: a cache that counts its own lookups takes these from
// the tier below it.
func (t *Tally) AddTiers(u *Tally) {
	t.DiskHits += u.DiskHits
	t.DiskBytes += u.DiskBytes
	t.ColdReads += u.ColdReads
	t.ColdBytes += u.ColdBytes
}

// TakeViews returns the views CountView counted since the last TakeViews
// and their bytes, and forgets them: BlockViewer.Account adds them to the
// backend's statistics.
func (t *Tally) TakeViews() (views, bytes int64) {
	views, bytes = t.views, t.viewBytes
	t.views, t.viewBytes = 0, 0
	return views, bytes
}

// TierReader is implemented by a cache tier below a block cache (the local
// disk cache of partial/diskcache): ReadAtTiers is ReadAtContext that adds
// to t (when not nil) only where the bytes came from (Tally.DiskHits,
// ColdReads and their bytes), as the block cache above counts the lookup
// and the read itself.
type TierReader interface {
	ReadAtTiers(ctx context.Context, p []byte, off int64, t *Tally) (int, error)
}

// BlockViewer is implemented by block-caching backends. ViewBlock returns the
// n bytes at off without copying when the blocks they span are cached (a
// lock-free hit, counted in t when not nil); ok is false otherwise, and the
// caller reads with ReadAtContext (which caches the blocks). ViewBlock must be
// called inside a read section, between EnterRead and ExitRead: the bytes
// are immutable and stay valid until the section ends, even if the block is
// evicted or the backend closed meanwhile (Close waits for open sections).
// A nil t is a peek (prefetching): nothing is counted. Hits counted in t
// reach the backend's Stats when the caller passes t to Account (once per
// query: shared atomic adds per view would cost a warm search dearly).
type BlockViewer interface {
	ViewBlock(off, n int64, t *Tally) (b []byte, ok bool)
	// EnterRead opens a read section (e.g. for one query); ExitRead closes
	// it with the token EnterRead returned. Sections are cheap (two atomic
	// adds) and may nest.
	EnterRead() uint64
	ExitRead(token uint64)
	// CopyCached copies [off, off+len(dst)) into dst when every block it
	// spans is cached, without locks or device reads; false otherwise.
	CopyCached(dst []byte, off int64, t *Tally) bool
	// BlockSize is the size of the blocks ViewBlock serves.
	BlockSize() int64
	// Account adds the views counted in t since its last Account to the
	// backend's statistics.
	Account(t *Tally)
}

// Warmer is implemented by backends that can make a range fast to read
// ahead of queries: a block cache fills itself with it in large reads
// rather than one block per read; a mapping makes it resident (on huge
// pages where the kernel can). A warm-up gives up when ctx ends.
type Warmer interface {
	Warm(ctx context.Context, off, n int64) error
}
