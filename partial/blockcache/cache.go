package blockcache

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// Cache is a sharded LRU block cache with a byte budget, shared by any
// number of files. Each shard is a golang-lru simplelru guarded by its own
// mutex (the library's thread-safe Cache takes a write lock on every Get
// anyway). Blocks are immutable once cached and are never recycled, so a
// reader copying out of an evicted block is safe. When many goroutines miss
// the same block at once, one of them reads it and the others wait for that
// read ("one device read per missed block").
type Cache struct {
	shards    []cacheShard
	shift     uint         // shard() takes a hash's top 64-shift bits
	total     atomic.Int64 // the budget, as Budget reports it
	nextFile  atomic.Uint64
	evictions atomic.Int64
	bytes     atomic.Int64
	tablesMu  sync.RWMutex
	tables    map[uint64]*table // file id → its lock-free hit table
}

// blockKey packs a file id (24 bits) and a block index (40 bits) into one
// word: a one-word key hashes much faster than a struct on the hit path.
type blockKey uint64

const blkBits = 40

func keyOf(file uint64, blk int64) blockKey { return blockKey(file<<blkBits | uint64(blk)) }

func (k blockKey) file() uint64 { return uint64(k) >> blkBits }

func (k blockKey) blk() int64 { return int64(uint64(k) & (1<<blkBits - 1)) }

type cacheShard struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[blockKey, *block]
	budget  int64
	bytes   int64
	loading map[blockKey]*loadCall
	_       [40]byte // keep shards on separate cache lines
}

type loadCall struct {
	done chan struct{}
	buf  []byte
	slot int32 // buf's slot in the file's home, or -1: buf is on the heap
	err  error
	// gaveUp: the loader's own context ended (err is not the block's).
	gaveUp bool
}

// block is one cached block. Hits through a file's table set the block's
// ref bit there instead of moving the block in the LRU list (which needs
// the shard lock); eviction gives a block with ref set a second chance
// (CLOCK on top of the LRU).
type block struct {
	buf  []byte
	slot int32 // its slot, when its file's home is slots
}

// blockHome keeps a file's cached blocks off the Go heap: a mirror of the
// file's layout, or recycled slots. store copies a block in (nil: the file
// is closing); evicted hands it back, to be reused or given back after the
// read sections that could see it have ended.
type blockHome interface {
	store(blk int64, buf []byte) ([]byte, int32)
	evicted(blk int64, slot int32)
}

// table maps a file's block numbers to cached blocks for lock-free hits: a
// two-level array of atomic pointers whose chunks of 1024 entries are
// allocated as blocks arrive (8 KiB per 4 MiB of file touched at 4 KiB
// blocks). The LRU owns the blocks; the table only mirrors it. An entry
// points at the block's first byte, not at its block struct, and the ref
// bits live beside the entries: a hit loads the table and then the data,
// with no dependent miss on a struct in between, which a warm search on
// small blocks would notice.
type table struct {
	chunks []atomic.Pointer[tableChunk]
	home   blockHome // where the file's blocks live; nil: on the Go heap
}

type tableChunk struct {
	data [chunkLen]atomic.Pointer[byte]
	bits [chunkLen / 64]bitWords
}

// bitWords are 64 blocks' present and ref bits, side by side so that a hit
// through the present bits (mark, with a mirror) touches one cache line:
// 4 KiB of bits cover 64 MiB of file, where the pointers take 128 KiB.
type bitWords struct {
	present, refs atomic.Uint64
}

const chunkBits = 10
const chunkLen = 1 << chunkBits

func newTable(nblocks int64) *table {
	return &table{chunks: make([]atomic.Pointer[tableChunk], (nblocks+chunkLen-1)>>chunkBits)}
}

// lookup reports whether block blk is cached.
func (t *table) lookup(blk int64) bool {
	ch := t.chunks[blk>>chunkBits].Load()
	return ch != nil && ch.data[blk&(chunkLen-1)].Load() != nil
}

// hit returns the first byte of block blk if cached, marking it
// referenced: the lock-free hit path (callers count it, and know the
// block's length).
func (t *table) hit(blk int64) (*byte, bool) {
	ch := t.chunks[blk>>chunkBits].Load()
	if ch == nil {
		return nil, false
	}
	i := blk & (chunkLen - 1)
	p := ch.data[i].Load()
	if p == nil {
		return nil, false
	}
	if w, bit := &ch.bits[i>>6].refs, uint64(1)<<(i&63); w.Load()&bit == 0 {
		w.Or(bit)
	}
	return p, true
}

// mark reports whether block blk is cached, marking it referenced: hit
// without the pointer, for a mirror (whose blocks sit at known places).
func (t *table) mark(blk int64) bool {
	ch := t.chunks[blk>>chunkBits].Load()
	if ch == nil {
		return false
	}
	i := blk & (chunkLen - 1)
	w, bit := &ch.bits[i>>6], uint64(1)<<(i&63)
	if w.present.Load()&bit == 0 {
		return false
	}
	if w.refs.Load()&bit == 0 {
		w.refs.Or(bit)
	}
	return true
}

// markRange is mark for blocks blk..last, in one step when their bits
// share a word (a vector or list across one boundary, mostly).
func (t *table) markRange(blk, last int64) bool {
	if blk>>6 != last>>6 {
		for b := blk; b <= last; b++ {
			if !t.mark(b) {
				return false
			}
		}
		return true
	}
	ch := t.chunks[blk>>chunkBits].Load()
	if ch == nil {
		return false
	}
	i := blk & (chunkLen - 1)
	w := &ch.bits[i>>6]
	mask := (uint64(2)<<(last-blk) - 1) << (i & 63)
	if w.present.Load()&mask != mask {
		return false
	}
	if w.refs.Load()&mask != mask {
		w.refs.Or(mask)
	}
	return true
}

// referenced reports and clears block blk's ref bit (eviction's second
// chance).
func (t *table) referenced(blk int64) bool {
	ch := t.chunks[blk>>chunkBits].Load()
	if ch == nil {
		return false
	}
	i := blk & (chunkLen - 1)
	bit := uint64(1) << (i & 63)
	return ch.bits[i>>6].refs.And(^bit)&bit != 0
}

// set mirrors block b (empty blocks, e.g. a corrupt zstd frame's, are
// served by the LRU only).
func (t *table) set(blk int64, b *block) {
	if len(b.buf) == 0 {
		return
	}
	slot := &t.chunks[blk>>chunkBits]
	ch := slot.Load()
	if ch == nil {
		slot.CompareAndSwap(nil, new(tableChunk))
		ch = slot.Load()
	}
	i := blk & (chunkLen - 1)
	bit := uint64(1) << (i & 63)
	ch.bits[i>>6].refs.And(^bit)
	ch.data[i].Store(&b.buf[0])
	ch.bits[i>>6].present.Or(bit)
}

func (t *table) clear(blk int64, b *block) {
	if len(b.buf) == 0 {
		return
	}
	if ch := t.chunks[blk>>chunkBits].Load(); ch != nil {
		i := blk & (chunkLen - 1)
		if ch.data[i].CompareAndSwap(&b.buf[0], nil) {
			ch.bits[i>>6].present.And(^(uint64(1) << (i & 63)))
		}
	}
}

// maxShards and minShardBytes size a cache's shards: 16 of them, fewer
// for a budget under 16 MiB, so that each shard's part of the budget holds
// many blocks (a block larger than its shard's part is never cached; with
// 64 KiB blocks, 16 shards of a 600 KB budget cached nothing).
const (
	maxShards     = 16
	minShardBytes = 1 << 20
)

// New makes a cache holding at most budget bytes of blocks.
func New(budget int64) *Cache {
	n := maxShards
	for n > 1 && budget/int64(n) < minShardBytes {
		n /= 2
	}
	c := &Cache{shards: make([]cacheShard, n), shift: uint(64 - bits.TrailingZeros(uint(n))), tables: map[uint64]*table{}}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.lru, _ = simplelru.NewLRU[blockKey, *block](1<<30, func(k blockKey, v *block) {
			sh.bytes -= int64(len(v.buf))
			c.bytes.Add(-int64(len(v.buf)))
			c.evictions.Add(1)
			if t := c.table(k.file()); t != nil {
				t.clear(k.blk(), v)
				if t.home != nil {
					t.home.evicted(k.blk(), v.slot)
				}
			}
		})
		sh.loading = make(map[blockKey]*loadCall)
	}
	c.SetBudget(budget)
	return c
}

// SetBudget changes the byte budget, evicting blocks at once if it shrank.
func (c *Cache) SetBudget(budget int64) {
	per := max(budget/int64(len(c.shards)), 0)
	c.total.Store(per * int64(len(c.shards)))
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.budget = per
		c.shrink(sh)
		sh.mu.Unlock()
	}
}

// Budget is the current byte budget.
func (c *Cache) Budget() int64 {
	c.shards[0].mu.Lock()
	defer c.shards[0].mu.Unlock()
	return c.shards[0].budget * int64(len(c.shards))
}

// Bytes is the number of bytes of blocks held now.
func (c *Cache) Bytes() int64 { return c.bytes.Load() }

// Evictions is the number of blocks evicted so far.
func (c *Cache) Evictions() int64 { return c.evictions.Load() }

// shrink evicts down to the budget. A block hit since it last reached the
// LRU's old end (ref set) moves to the front once instead of leaving.
func (c *Cache) shrink(sh *cacheShard) {
	for chances := sh.lru.Len(); sh.bytes > sh.budget && sh.lru.Len() > 0; {
		k, _, _ := sh.lru.GetOldest()
		if t := c.table(k.file()); chances > 0 && t != nil && t.referenced(k.blk()) {
			chances--
			sh.lru.Get(k) // to the front
			continue
		}
		sh.lru.RemoveOldest()
	}
}

// newFile registers a file of nblocks blocks and returns its id.
func (c *Cache) newFile(nblocks int64, home blockHome) (uint64, *table) {
	id := c.nextFile.Add(1) & (1<<(64-blkBits) - 1)
	t := newTable(nblocks)
	t.home = home
	c.tablesMu.Lock()
	c.tables[id] = t
	c.tablesMu.Unlock()
	return id, t
}

func (c *Cache) table(file uint64) *table {
	c.tablesMu.RLock()
	defer c.tablesMu.RUnlock()
	return c.tables[file]
}

func (c *Cache) shard(k blockKey) *cacheShard {
	h := uint64(k) * 0x9E3779B97F4A7C15
	return &c.shards[h>>c.shift] // shift 64 (one shard): 0
}

// get returns block k, loading it with load on a miss. hit reports whether
// it was cached (or being loaded by someone else).
// load reads a block into a buffer of its own, or straight into a slot of
// the file's home (slot ≥ 0; Cached with slots), and returns it.
//
// A caller waiting for another's load gives up when its ctx ends; one
// whose loader gave up for its own ctx's sake loads the block itself.
func (c *Cache) get(ctx context.Context, k blockKey, load func() ([]byte, int32, error)) (b []byte, hit bool, err error) {
	sh := c.shard(k)
	sh.mu.Lock()
	if b, ok := sh.lru.Get(k); ok {
		sh.mu.Unlock()
		return b.buf, true, nil
	}
	if call, ok := sh.loading[k]; ok {
		sh.mu.Unlock()
		select {
		case <-call.done:
		case <-ctx.Done():
			return nil, true, fmt.Errorf("waiting for a block another read is loading: %w", context.Cause(ctx))
		}
		if call.gaveUp && partial.Interrupted(ctx) == nil {
			return c.get(ctx, k, load)
		}
		return call.buf, true, call.err
	}
	call := &loadCall{done: make(chan struct{})}
	sh.loading[k] = call
	sh.mu.Unlock()

	call.buf, call.slot, call.err = load()
	call.gaveUp = call.err != nil && partial.Interrupted(ctx) != nil

	sh.mu.Lock()
	delete(sh.loading, k)
	if call.err == nil {
		c.insertLocked(sh, k, call.buf, call.slot)
	}
	sh.mu.Unlock()
	close(call.done)
	return call.buf, false, call.err
}

// insertLocked caches buf as block k (sh.mu held) unless it is there
// already or larger than the shard's budget. buf is in its file's home
// already when slot ≥ 0 (a refused one goes back there: its loader's
// waiters may still be copying out of it).
func (c *Cache) insertLocked(sh *cacheShard, k blockKey, buf []byte, slot int32) {
	t := c.table(k.file())
	if _, ok := sh.lru.Peek(k); ok || int64(len(buf)) > sh.budget {
		if slot >= 0 && t != nil && t.home != nil {
			t.home.evicted(k.blk(), slot)
		}
		return
	}
	if slot < 0 && t != nil && t.home != nil && len(buf) > 0 {
		if buf, slot = t.home.store(k.blk(), buf); buf == nil {
			return // the file is closing
		}
	}
	b := &block{buf: buf, slot: slot}
	sh.lru.Add(k, b)
	sh.bytes += int64(len(buf))
	c.bytes.Add(int64(len(buf)))
	if t != nil {
		t.set(k.blk(), b)
	}
	c.shrink(sh)
}

// put caches buf as block k (a batch load; see Cached.ReadBatch).
func (c *Cache) put(k blockKey, buf []byte) {
	sh := c.shard(k)
	sh.mu.Lock()
	c.insertLocked(sh, k, buf, -1)
	sh.mu.Unlock()
}

// forget drops every block of file (when a Storage closes).
func (c *Cache) forget(file uint64) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for _, k := range sh.lru.Keys() {
			if k.file() == file {
				sh.lru.Remove(k)
			}
		}
		sh.mu.Unlock()
	}
	c.tablesMu.Lock()
	delete(c.tables, file)
	c.tablesMu.Unlock()
}

// Cached puts a block cache in front of a partial.Storage: reads are served in
// blocks of blockSize bytes (the file's last block may be shorter), each
// read from the inner Storage once while it stays cached. Where it can
// (unix, blocks of whole pages) it keeps the blocks in a mirror of the
// file's layout, so ViewBlock serves ranges across blocks without copying.
type Cached struct {
	inner    partial.Storage
	tiers    partial.TierReader // inner, when it is a cache tier (a disk cache)
	cache    *Cache
	ownCache bool
	file     uint64
	table    *table
	g        grid // the blocks; g.size is the file's
	name     string
	closed   atomic.Bool
	mirror   *mirror          // the blocks' home when the cache can hold the file
	slots    *slots           // their home when it cannot (a private cache)
	sec      *sections        // either home's read sections; nil: blocks on the Go heap
	stripes  [8]counterStripe // by block number: concurrent readers rarely share a line
}

// counterStripe is one cache line of the wrapper's accounting.
type counterStripe struct {
	requests, bytes, hits, misses atomic.Int64
	hitBytes                      atomic.Int64 // counted above a cache tier only (TierStats)
	_                             [24]byte
}

// grid maps file offsets to cache blocks: block k holds the file's bytes
// [k·bs − pad, (k+1)·bs − pad), clipped to the file, so the first block and
// the last may be shorter. pad is 0 except with a mirror, where it places a
// chosen file offset on a cache line in memory.
type grid struct {
	lg   uint // log2(bs): the hit paths shift instead of dividing
	bs   int64
	pad  int64
	size int64
}

func (g grid) blk(off int64) int64 { return (off + g.pad) >> g.lg }

// span is block blk's range of the file.
func (g grid) span(blk int64) (start, end int64) {
	return max(blk<<g.lg-g.pad, 0), min((blk+1)<<g.lg-g.pad, g.size)
}

// count is the number of blocks.
func (g grid) count() int64 { return (g.size + g.pad + g.bs - 1) >> g.lg }

// NewCached wraps inner with cache (a private one of budget bytes when cache
// is nil). blockSize must be a power of two; 4096 when 0. Closing the
// Cached closes inner and drops its blocks.
func NewCached(name string, inner partial.Storage, cache *Cache, budget int64, blockSize int) (*Cached, error) {
	return NewCachedAligned(name, inner, cache, budget, blockSize, 0)
}

// NewCachedAligned is NewCached whose mirror (where there is one) puts the
// file's offset align on a 64-byte boundary in memory, as OpenMemoryAligned
// does: give it the vectors' offset so none straddles more cache lines than
// it must. The blocks then start at align mod 64 before a multiple of the
// block size, so inner reads are not block-aligned: not for O_DIRECT.
//
// A mirror is kept when the cache's budget covers the file with an eighth
// to spare (shards fill unevenly): a cache that churns would pay a page
// fault and an madvise per block, far slower than heap blocks, which cost
// an allocation.
func NewCachedAligned(name string, inner partial.Storage, cache *Cache, budget int64, blockSize int, align int64) (*Cached, error) {
	return newCached(name, inner, cache, budget, blockSize, align, false)
}

// CheckBlockSize reports whether blockSize (0: the default 4096) is a
// block size a block cache accepts: a power of two ≥ 512.
func CheckBlockSize(blockSize int) error {
	if blockSize != 0 && (blockSize < 512 || blockSize&(blockSize-1) != 0) {
		return fmt.Errorf("%w: block size %d is not a power of two ≥ 512", partial.ErrBadOption, blockSize)
	}
	return nil
}

// MirrorBudget is the smallest cache budget that keeps a file of size
// bytes in a mirror (where the platform allows), the only case in which an
// align offset matters.
func MirrorBudget(size int64) int64 { return size + size/8 }

// mirrors reports whether a block cache of budget bytes keeps a file of
// size bytes in a mirror.
func mirrors(budget, size int64) bool { return budget >= MirrorBudget(size) }

// newCached is NewCachedAligned; alwaysMirror keeps a mirror whatever the
// budget (tests of eviction with a mirror).
func newCached(name string, inner partial.Storage, cache *Cache, budget int64, blockSize int, align int64, alwaysMirror bool) (*Cached, error) {
	if blockSize == 0 {
		blockSize = 4096
	}
	if err := CheckBlockSize(blockSize); err != nil {
		return nil, err
	}
	c := &Cached{inner: inner, cache: cache, name: name,
		g: grid{lg: uint(bits.TrailingZeros(uint(blockSize))), bs: int64(blockSize), size: inner.Size()}}
	if cache == nil {
		c.cache, c.ownCache = New(budget), true
	}
	c.tiers, _ = inner.(partial.TierReader)
	if alwaysMirror || mirrors(c.cache.Budget(), c.g.size) {
		// 2 MiB pages only where they cannot cost memory beyond the budget:
		// a private cache, which holds the whole file.
		huge := c.ownCache && budget >= c.g.size
		// Over a cache tier (a disk cache, whose blocks start at multiples
		// of the block size) no pad: a padded block would span two of its
		// blocks, and every miss read both.
		if align > 0 && c.tiers == nil {
			c.g.pad = (64 - align%64) % 64
		}
		if c.mirror = newMirror(c.g, huge); c.mirror == nil {
			c.g.pad = 0 // blocks on the Go heap: their own alignment
		}
	}
	var home blockHome
	switch {
	case c.mirror != nil:
		home, c.sec = c.mirror, &c.mirror.sections
	case c.ownCache:
		// A shared cache keeps heap blocks: slots freed by one file's
		// evictions would stay with that file, outside the shared budget.
		c.slots = newSlots(c.g.bs, &c.cache.total)
		home, c.sec = c.slots, &c.slots.sections
	}
	c.file, c.table = c.cache.newFile(c.g.count(), home)
	return c, nil
}

func (c *Cached) Size() int64 { return c.g.size }

// BlockSize is the cache block size.
func (c *Cached) BlockSize() int64 { return c.g.bs }

// ReadAtContext reads p at off through the cache, adding the cache hits
// and misses and the device reads of misses to t (when not nil). It fails
// at once under a ctx that has ended, and gives up when ctx ends while its
// misses are read from the inner storage or wait for blocks another caller
// is reading.
//
// Reads need no reference count: closing makes new reads fail, and a read in
// flight either finishes or gets the inner backend's ErrClosed.
func (c *Cached) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	return c.read(ctx, p, off, t, nil)
}

// read serves p from the cache; fresh lists blocks a batch loaded for this
// read, which count as its misses.
func (c *Cached) read(ctx context.Context, p []byte, off int64, t *partial.Tally, fresh *[]int64) (int, error) {
	if c.sec != nil {
		e := c.sec.enter()
		defer c.sec.exit(e)
	}
	if c.closed.Load() {
		return 0, backendkit.Closed(c.name)
	}
	st := &c.stripes[c.g.blk(off)&7]
	st.requests.Add(1)
	st.bytes.Add(int64(len(p)))
	if err := backendkit.CheckRange(c.name, off, int64(len(p)), c.g.size); err != nil {
		return 0, err
	}
	if err := partial.Interrupted(ctx); err != nil {
		return 0, fmt.Errorf("%s: read of %d bytes at offset %d given up: %w", c.name, len(p), off, err)
	}
	if len(p) > 0 && fresh == nil && c.bypass(off, int64(len(p))) {
		if err := c.readInner(ctx, p, off, t); err != nil {
			return 0, fmt.Errorf("%s: reading %d bytes at offset %d: %w", c.name, len(p), off, err)
		}
		st.misses.Add(1)
		t.CountLookup(false, int64(len(p)))
		return len(p), nil
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		blk := c.g.blk(pos)
		b, err := c.block(ctx, blk, t, fresh)
		if err != nil {
			return done, err
		}
		start, _ := c.g.span(blk)
		done += copy(p[done:], b[pos-start:])
	}
	return done, nil
}

// bypassBlocks is the number of blocks from which a read the cache does not
// hold whole goes to the inner storage in one read, uncached: such reads
// are an open's loads of whole arrays, which misses would serve a block at
// a time (a GET each over S3) and which would evict the blocks searches
// use.
const bypassBlocks = 16

// bypass reports whether the read of n bytes at off skips the cache.
func (c *Cached) bypass(off, n int64) bool {
	first, last := c.g.blk(off), c.g.blk(off+n-1)
	if last-first+1 < bypassBlocks {
		return false
	}
	for b := first; b <= last; b++ {
		if !c.table.lookup(b) {
			return true
		}
	}
	return false
}

func (c *Cached) block(ctx context.Context, blk int64, t *partial.Tally, fresh *[]int64) ([]byte, error) {
	if p, ok := c.table.hit(blk); ok {
		buf := c.blockBytes(p, blk)
		// A block a batch has just loaded for this caller is its miss.
		c.count(blk, !claim(fresh, blk), len(buf), t)
		return buf, nil
	}
	claim(fresh, blk) // loaded but evicted already: the read below is the miss
	b, hit, err := c.cache.get(ctx, keyOf(c.file, blk), func() ([]byte, int32, error) {
		start, end := c.g.span(blk)
		// Straight into a slot when the blocks live in slots: no heap
		// buffer per miss for the collector, no copy.
		buf, slot := []byte(nil), int32(-1)
		if c.slots != nil {
			buf, slot = c.slots.take()
		}
		if buf == nil {
			buf, slot = make([]byte, end-start), -1
		}
		buf = buf[:end-start]
		if err := c.readInner(ctx, buf, start, t); err != nil {
			if slot >= 0 {
				c.slots.untake(slot)
			}
			return nil, -1, fmt.Errorf("%s: reading block of %d bytes at offset %d: %w", c.name, len(buf), start, err)
		}
		return buf, slot, nil
	})
	if err != nil && b == nil && hit { // a wait given up
		start, _ := c.g.span(blk)
		return nil, fmt.Errorf("%s: block at offset %d: %w", c.name, start, err)
	}
	c.count(blk, hit, len(b), t)
	return b, err
}

// readInner reads a missing block from the inner storage; a cache tier
// below (partial.TierReader) adds to t where the bytes came from.
func (c *Cached) readInner(ctx context.Context, buf []byte, off int64, t *partial.Tally) error {
	var err error
	if c.tiers != nil {
		_, err = c.tiers.ReadAtTiers(ctx, buf, off, t)
	} else {
		_, err = c.inner.ReadAtContext(ctx, buf, off, nil)
	}
	return err
}

// count records one block lookup in the backend's stripe and in t.
func (c *Cached) count(blk int64, hit bool, n int, t *partial.Tally) {
	st := &c.stripes[blk&7]
	if hit {
		st.hits.Add(1)
		if c.tiers != nil {
			st.hitBytes.Add(int64(n))
		}
	} else {
		st.misses.Add(1)
	}
	t.CountLookup(hit, int64(n))
}

// claim removes blk from *fresh and reports whether it was there.
func claim(fresh *[]int64, blk int64) bool {
	if fresh == nil {
		return false
	}
	for i, b := range *fresh {
		if b == blk {
			(*fresh)[i] = (*fresh)[len(*fresh)-1]
			*fresh = (*fresh)[:len(*fresh)-1]
			return true
		}
	}
	return false
}

// ReadBatch serves the requests through the cache. The blocks none of them
// has cached are read first as one batch from the inner backend (on direct:
// one io_uring submission, reads in parallel) and cached; each such block is
// a miss of the first request that reads it, every other block a hit.
// Its reads and waits give up when ctx ends.
func (c *Cached) ReadBatch(ctx context.Context, reqs []partial.ReadReq) error {
	if c.closed.Load() {
		return backendkit.Closed(c.name)
	}
	var fresh []int64
	if br, ok := c.inner.(partial.BatchReader); ok {
		var missing []int64
		for _, q := range reqs {
			if q.Off < 0 || len(q.Buf) == 0 || int64(len(q.Buf)) > c.g.size-q.Off {
				continue // read reports the error below
			}
			for blk := c.g.blk(q.Off); blk <= c.g.blk(q.Off+int64(len(q.Buf))-1); blk++ {
				// Short blocks (the file's tail, a padded head) load on their own.
				if start, end := c.g.span(blk); !c.table.lookup(blk) && end-start == c.g.bs && !slices.Contains(missing, blk) {
					missing = append(missing, blk)
				}
			}
		}
		if len(missing) > 1 {
			inner := make([]partial.ReadReq, len(missing))
			for i, blk := range missing {
				start, _ := c.g.span(blk)
				inner[i] = partial.ReadReq{Off: start, Buf: make([]byte, c.g.bs)}
			}
			br.ReadBatch(ctx, inner) // failed requests are read again one by one below
			for _, q := range inner {
				if c.tiers != nil && len(reqs) > 0 {
					reqs[0].IO.AddTiers(&q.IO) // where the batch's blocks came from, as the first request's
				}
				if q.Err == nil {
					c.cache.put(keyOf(c.file, c.g.blk(q.Off)), q.Buf)
					fresh = append(fresh, c.g.blk(q.Off))
				}
			}
		}
	}
	var first error
	for i := range reqs {
		q := &reqs[i]
		if _, q.Err = c.read(ctx, q.Buf, q.Off, &q.IO, &fresh); q.Err != nil && first == nil {
			first = q.Err
		}
	}
	return first
}

// ViewBlock returns the cached bytes [off, off+n) without copying when every
// block they span is cached (in one block only, without a mirror); see
// BlockViewer. A nil t is a peek (e.g. to prefetch) and counts nothing.
func (c *Cached) ViewBlock(off, n int64, t *partial.Tally) ([]byte, bool) {
	if n <= 0 || off < 0 || off+n > c.g.size || c.closed.Load() {
		return nil, false
	}
	blk, last := c.g.blk(off), c.g.blk(off+n-1)
	if c.mirror != nil {
		if !c.table.markRange(blk, last) {
			return nil, false
		}
		if t != nil {
			t.CountView(n)
		}
		at := c.g.pad + off
		return c.mirror.mem.B[at : at+n : at+n], true
	}
	p, ok := c.table.hit(blk)
	if !ok || last != blk {
		return nil, false
	}
	if t != nil {
		t.CountView(n)
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(p), off&(c.g.bs-1))), n), true
}

// blockBytes is block blk's bytes from the first one (table.hit): a whole
// block, or the file's shorter tail.
func (c *Cached) blockBytes(p *byte, blk int64) []byte {
	start, end := c.g.span(blk)
	return unsafe.Slice(p, end-start)
}

// Account adds the views counted in t to the backend's statistics; see
// BlockViewer.
func (c *Cached) Account(t *partial.Tally) {
	views, bytes := t.TakeViews()
	if views == 0 {
		return
	}
	st := &c.stripes[views&7]
	st.requests.Add(views)
	st.bytes.Add(bytes)
	st.hits.Add(views)
	if c.tiers != nil {
		st.hitBytes.Add(bytes)
	}
}

// CopyCached copies [off, off+len(dst)) into dst when every block it
// spans is cached (lock-free, like ViewBlock; for ranges that cross a
// block boundary), counting the hits in t; false, with dst undefined, when
// one is missing or the range is out of bounds. See BlockViewer.
func (c *Cached) CopyCached(dst []byte, off int64, t *partial.Tally) bool {
	n := int64(len(dst))
	if c.sec != nil {
		e := c.sec.enter()
		defer c.sec.exit(e)
	}
	if n <= 0 || off < 0 || off+n > c.g.size || c.closed.Load() {
		return false
	}
	for done := int64(0); done < n; {
		pos := off + done
		blk := c.g.blk(pos)
		p, ok := c.table.hit(blk)
		if !ok {
			return false
		}
		start, _ := c.g.span(blk)
		done += int64(copy(dst[done:], c.blockBytes(p, blk)[pos-start:]))
	}
	if t != nil {
		t.CountView(n)
	}
	return true
}

// Close drops the file's blocks from the cache and closes the inner
// backend; a second Close returns ErrClosed.
func (c *Cached) Close() error {
	if c.closed.Swap(true) {
		return backendkit.Closed(c.name)
	}
	c.cache.forget(c.file)
	err := c.inner.Close()
	var home interface{ release() error }
	switch {
	case c.mirror != nil:
		home = c.mirror
	case c.slots != nil:
		home = c.slots
	}
	if home != nil {
		if e := home.release(); err == nil {
			err = e
		}
	}
	return err
}

// fillRead is how much Fill reads from the inner backend at once.
const fillRead = 1 << 20

// Warm (Warmer) caches the blocks of [off, off+n) that are not cached yet, reading
// the range from the inner backend 1 MiB at a time: a warm-up costs a few
// large reads instead of a device round trip per block (pread files have
// the kernel's read-ahead off). The cache's budget applies as to any read.
// It gives up when ctx ends.
func (c *Cached) Warm(ctx context.Context, off, n int64) error {
	if c.closed.Load() {
		return backendkit.Closed(c.name)
	}
	if n <= 0 {
		return nil
	}
	if err := backendkit.CheckRange(c.name, off, n, c.g.size); err != nil {
		return err
	}
	per := max(1, fillRead/c.g.bs) // blocks per inner read
	buf := make([]byte, per*c.g.bs)
	first, last := c.g.blk(off), c.g.blk(off+n-1)
	for b := first; b <= last; b += per {
		e := min(b+per-1, last)
		start, _ := c.g.span(b)
		_, end := c.g.span(e)
		if _, err := c.inner.ReadAtContext(ctx, buf[:end-start], start, nil); err != nil {
			return fmt.Errorf("%s: filling %d bytes at offset %d: %w", c.name, end-start, start, err)
		}
		for k := b; k <= e; k++ {
			if c.table.lookup(k) {
				continue
			}
			s, t := c.g.span(k)
			blk := buf[s-start : t-start]
			if c.sec == nil {
				blk = slices.Clone(blk) // a heap block: its own buffer, not a piece of buf
			}
			c.cache.put(keyOf(c.file, k), blk) // copied into the home, if any
		}
	}
	return nil
}

// EnterRead opens a read section; see BlockViewer.
func (c *Cached) EnterRead() uint64 {
	if c.sec == nil {
		return 0
	}
	return c.sec.enter()
}

// ExitRead closes the read section EnterRead opened.
func (c *Cached) ExitRead(token uint64) {
	if c.sec != nil {
		c.sec.exit(token)
	}
}

// Stats merges the wrapper's requests and cache counters with the inner
// backend's device reads; ResidentBytes is the cache's (shared) content.
// Above a cache tier, Tiers is the tier's with this cache's hits as the
// memory tier.
func (c *Cached) Stats() partial.Stats {
	var s partial.Stats
	var hitBytes int64
	for i := range c.stripes {
		st := &c.stripes[i]
		s.Requests += st.requests.Load()
		s.BytesRequested += st.bytes.Load()
		s.CacheHits += st.hits.Load()
		s.CacheMisses += st.misses.Load()
		hitBytes += st.hitBytes.Load()
	}
	if r, ok := c.inner.(partial.StatsReporter); ok {
		in := r.Stats()
		s.ReadCalls, s.BytesRead = in.ReadCalls, in.BytesRead
		s.ResidentBytes += in.ResidentBytes
		if in.Tiers != nil {
			ts := *in.Tiers
			ts.MemoryHits, ts.MemoryBytes = s.CacheHits, hitBytes
			s.Tiers = &ts
		}
	}
	s.CacheEvictions = c.cache.Evictions()
	s.ResidentBytes += c.cache.Bytes()
	switch {
	case c.mirror != nil:
		s.ResidentBytes += c.mirror.pendingBytes.Load() // evicted, not yet given back
	case c.slots != nil:
		s.ResidentBytes += c.slots.pendingBytes.Load() // evicted, not yet reusable
	}
	return s
}

// CheckFile forwards to the wrapped storage (nil when it is not a
// partial.FileChecker).
func (c *Cached) CheckFile(ctx context.Context) error {
	if f, ok := c.inner.(partial.FileChecker); ok {
		return f.CheckFile(ctx)
	}
	return nil
}

// CheckFD forwards to the wrapped storage (nil when it is not a
// partial.FileChecker).
func (c *Cached) CheckFD() error {
	if f, ok := c.inner.(partial.FileChecker); ok {
		return f.CheckFD()
	}
	return nil
}

// Inner is the wrapped Storage.
func (c *Cached) Inner() partial.Storage { return c.inner }

// Cache returns the block cache in use.
func (c *Cached) Cache() *Cache { return c.cache }
