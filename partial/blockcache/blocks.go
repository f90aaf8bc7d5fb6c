package blockcache

import (
	"context"
	"unsafe"
)

// Blocks is one file's blocks in a Cache, numbered from 0 and of any size,
// for a backend that makes its blocks itself (the zstd backend decodes
// frames) instead of reading them through a Cached.
type Blocks struct {
	cache *Cache
	file  uint64
	table *table
}

// Register adds a file of n blocks to c. Forget drops it.
func (c *Cache) Register(n int64) *Blocks {
	file, t := c.newFile(n, nil)
	return &Blocks{cache: c, file: file, table: t}
}

// Hit returns the n bytes of block i when it is cached (marking it
// referenced): the lock-free hit path. n is the block's length, which the
// caller knows.
func (b *Blocks) Hit(i, n int64) ([]byte, bool) {
	p, ok := b.table.hit(i)
	if !ok {
		return nil, false
	}
	return unsafe.Slice(p, n), true
}

// Get returns block i, calling load on a miss; when many callers miss the
// same block at once one of them loads it and the others wait. hit reports
// whether the block was cached or loaded by another caller. A wait for
// another's load gives up when ctx ends (load is given ctx by its caller);
// a caller whose loader gave up so loads the block itself.
func (b *Blocks) Get(ctx context.Context, i int64, load func() ([]byte, error)) (buf []byte, hit bool, err error) {
	return b.cache.get(ctx, keyOf(b.file, i), func() ([]byte, int32, error) {
		buf, err := load()
		return buf, -1, err
	})
}

// Forget drops the file's blocks (when its storage closes).
func (b *Blocks) Forget() { b.cache.forget(b.file) }

// NewWhole makes a private cache for one file whose blocks total at most
// budget bytes: every shard gets the whole budget, lest a block be refused
// for landing in a full shard, so it never evicts.
func NewWhole(budget int64) *Cache {
	c := New(budget)
	c.SetBudget(budget * int64(len(c.shards)))
	return c
}
