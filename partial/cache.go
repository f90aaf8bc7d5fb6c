package partial

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
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
	nextFile  atomic.Uint64
	evictions atomic.Int64
	bytes     atomic.Int64
}

// blockKey packs a file id (24 bits) and a block index (40 bits) into one
// word: a one-word key hashes much faster than a struct on the hit path.
type blockKey uint64

const blkBits = 40

func keyOf(file uint64, blk int64) blockKey { return blockKey(file<<blkBits | uint64(blk)) }

func (k blockKey) file() uint64 { return uint64(k) >> blkBits }

type cacheShard struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[blockKey, []byte]
	budget  int64
	bytes   int64
	loading map[blockKey]*loadCall
	_       [40]byte // keep shards on separate cache lines
}

type loadCall struct {
	done chan struct{}
	buf  []byte
	err  error
}

// NewCache makes a cache holding at most budget bytes of blocks.
func NewCache(budget int64) *Cache {
	const n = 16 // shard() takes the top 4 bits of a hash
	c := &Cache{shards: make([]cacheShard, n)}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.lru, _ = simplelru.NewLRU[blockKey, []byte](1<<30, func(_ blockKey, v []byte) {
			sh.bytes -= int64(len(v))
			c.bytes.Add(-int64(len(v)))
			c.evictions.Add(1)
		})
		sh.loading = make(map[blockKey]*loadCall)
	}
	c.SetBudget(budget)
	return c
}

// SetBudget changes the byte budget, evicting blocks at once if it shrank.
func (c *Cache) SetBudget(budget int64) {
	per := max(budget/int64(len(c.shards)), 0)
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.budget = per
		sh.shrink()
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

func (sh *cacheShard) shrink() {
	for sh.bytes > sh.budget && sh.lru.Len() > 0 {
		sh.lru.RemoveOldest()
	}
}

func (c *Cache) newFile() uint64 { return c.nextFile.Add(1) & (1<<(64-blkBits) - 1) }

func (c *Cache) shard(k blockKey) *cacheShard {
	h := uint64(k) * 0x9E3779B97F4A7C15
	return &c.shards[h>>60]
}

// get returns block k, loading it with load on a miss. hit reports whether
// it was cached (or being loaded by someone else).
func (c *Cache) get(k blockKey, load func() ([]byte, error)) (b []byte, hit bool, err error) {
	sh := c.shard(k)
	sh.mu.Lock()
	if b, ok := sh.lru.Get(k); ok {
		sh.mu.Unlock()
		return b, true, nil
	}
	if call, ok := sh.loading[k]; ok {
		sh.mu.Unlock()
		<-call.done
		return call.buf, true, call.err
	}
	call := &loadCall{done: make(chan struct{})}
	sh.loading[k] = call
	sh.mu.Unlock()

	call.buf, call.err = load()

	sh.mu.Lock()
	delete(sh.loading, k)
	if call.err == nil && int64(len(call.buf)) <= sh.budget {
		sh.lru.Add(k, call.buf)
		sh.bytes += int64(len(call.buf))
		c.bytes.Add(int64(len(call.buf)))
		sh.shrink()
	}
	sh.mu.Unlock()
	close(call.done)
	return call.buf, false, call.err
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
}

// Cached puts a block cache in front of a Storage: reads are served in
// blocks of blockSize bytes (the file's last block may be shorter), each
// read from the inner Storage once while it stays cached.
type Cached struct {
	inner     Storage
	cache     *Cache
	ownCache  bool
	file      uint64
	blockSize int64
	size      int64
	name      string
	life      life
	counters
}

// NewCached wraps inner with cache (a private one of budget bytes when cache
// is nil). blockSize must be a power of two; 4096 when 0. Closing the
// Cached closes inner and drops its blocks.
func NewCached(name string, inner Storage, cache *Cache, budget int64, blockSize int) (*Cached, error) {
	if blockSize == 0 {
		blockSize = 4096
	}
	if blockSize < 512 || blockSize&(blockSize-1) != 0 {
		return nil, fmt.Errorf("partial: block size %d is not a power of two ≥ 512", blockSize)
	}
	c := &Cached{inner: inner, cache: cache, blockSize: int64(blockSize), size: inner.Size(), name: name}
	if cache == nil {
		c.cache, c.ownCache = NewCache(budget), true
	}
	c.file = c.cache.newFile()
	c.life.free = func() error {
		c.cache.forget(c.file)
		return c.inner.Close()
	}
	return c, nil
}

func (c *Cached) Size() int64 { return c.size }

func (c *Cached) ReadAt(p []byte, off int64) (int, error) { return c.ReadAtTally(p, off, nil) }

// ReadAtTally is ReadAt that adds the cache hits and misses and the device
// reads of misses to t (when not nil).
func (c *Cached) ReadAtTally(p []byte, off int64, t *Tally) (int, error) {
	if !c.life.acquire() {
		return 0, closedErr(c.name)
	}
	defer c.life.release()
	c.request(len(p))
	if err := rangeCheck(c.name, off, int64(len(p)), c.size); err != nil {
		return 0, err
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		blk := pos / c.blockSize
		b, err := c.block(blk, t)
		if err != nil {
			return done, err
		}
		done += copy(p[done:], b[pos-blk*c.blockSize:])
	}
	return done, nil
}

func (c *Cached) block(blk int64, t *Tally) ([]byte, error) {
	b, hit, err := c.cache.get(keyOf(c.file, blk), func() ([]byte, error) {
		start := blk * c.blockSize
		buf := make([]byte, min(c.blockSize, c.size-start))
		if _, err := c.inner.ReadAt(buf, start); err != nil {
			return nil, fmt.Errorf("partial: %s: reading block of %d bytes at offset %d: %w", c.name, len(buf), start, err)
		}
		return buf, nil
	})
	if hit {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	if t != nil {
		if hit {
			t.CacheHits++
		} else {
			t.CacheMisses++
			t.DeviceReads++
			t.DeviceBytes += int64(len(b))
		}
	}
	return b, err
}

// ReadBatch serves the requests through the cache, up to 16 at a time, so
// their misses reach the device in parallel.
func (c *Cached) ReadBatch(reqs []ReadReq) error {
	return readBatchParallel(c, reqs, 16)
}

func (c *Cached) Close() error { return c.life.close(c.name) }

// Stats merges the wrapper's requests and cache counters with the inner
// backend's device reads; ResidentBytes is the cache's (shared) content.
func (c *Cached) Stats() Stats {
	s := c.snapshot()
	if r, ok := c.inner.(StatsReporter); ok {
		in := r.Stats()
		s.ReadCalls, s.BytesRead = in.ReadCalls, in.BytesRead
		s.ResidentBytes += in.ResidentBytes
	}
	s.CacheEvictions = c.cache.Evictions()
	s.ResidentBytes += c.cache.Bytes()
	return s
}

// Inner is the wrapped Storage.
func (c *Cached) Inner() Storage { return c.inner }

// Cache returns the block cache in use.
func (c *Cached) Cache() *Cache { return c.cache }
