package blockcache

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// TestCacheSecondChance: a block hit through the lock-free path (its ref
// bit in the table) survives the next eviction in its shard once; an
// unreferenced one leaves first.
func TestCacheSecondChance(t *testing.T) {
	const bs = 512
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 31)
	}
	c, err := NewCached("mem", partial.NewMemory("mem", data), nil, 2*bs, bs) // one shard (a small budget) of two blocks
	require.NoError(t, err)
	defer c.Close()
	// Three blocks of one shard.
	var same []int64
	want := c.cache.shard(keyOf(c.file, 0))
	for blk := int64(0); len(same) < 3; blk++ {
		if c.cache.shard(keyOf(c.file, blk)) == want {
			same = append(same, blk)
		}
	}
	a, b, d := same[0], same[1], same[2]
	buf := make([]byte, bs)
	for _, blk := range []int64{a, b} {
		_, err := c.ReadAtContext(context.Background(), buf, blk*bs, nil)
		require.NoError(t, err)
	}
	_, ok := c.ViewBlock(a*bs, bs, nil) // a: oldest, but referenced
	require.True(t, ok, "block a not cached")
	_, err = c.ReadAtContext(context.Background(), buf, d*bs, nil) // evicts one of a, b
	require.NoError(t, err)
	_, ok = c.ViewBlock(a*bs, 1, nil)
	assert.True(t, ok, "the referenced block was evicted")
	_, ok = c.ViewBlock(b*bs, 1, nil)
	assert.False(t, ok, "the unreferenced block stayed")
	_, ok = c.ViewBlock(d*bs, 1, nil)
	assert.True(t, ok, "the new block is not cached")
}

// TestSmallBudgetShards: a budget under 16 MiB is split over fewer shards,
// so each holds many blocks: a file of seven 64 KiB blocks under a budget
// of 600 KB is cached whole (16 shards of 37 KB each refused every block).
func TestSmallBudgetShards(t *testing.T) {
	for _, c := range []struct {
		budget int64
		shards int
	}{{0, 1}, {600 << 10, 1}, {2 << 20, 2}, {15 << 20, 8}, {16 << 20, 16}, {1 << 30, 16}} {
		assert.Len(t, New(c.budget).shards, c.shards, "budget %d", c.budget)
	}
	const bs = 64 << 10
	data := make([]byte, 7*bs-1000)
	cc, err := NewCached("mem", partial.NewMemory("mem", data), nil, 600000, bs)
	require.NoError(t, err)
	defer cc.Close()
	buf := make([]byte, 100)
	for range 3 {
		for off := int64(0); off < int64(len(data))-100; off += 30000 {
			_, err := cc.ReadAtContext(context.Background(), buf, off, nil)
			require.NoError(t, err)
		}
	}
	st := cc.Stats()
	assert.Equal(t, int64(7), st.CacheMisses, "each block read once")
	assert.Zero(t, st.CacheEvictions)
}

// TestCopyCached: a range across a block boundary is copied only when both
// blocks are cached, byte for byte, and counted as a hit.
func TestCopyCached(t *testing.T) {
	const bs = 512
	data := make([]byte, 8*bs+100)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	c, err := NewCached("mem", partial.NewMemory("mem", data), nil, 1<<20, bs)
	require.NoError(t, err)
	defer c.Close()
	dst := make([]byte, 300)
	off := int64(3*bs - 100)
	require.False(t, c.CopyCached(dst, off, nil), "CopyCached succeeded on an empty cache")
	_, err = c.ReadAtContext(context.Background(), make([]byte, 1), off, nil) // first block only
	require.NoError(t, err)
	require.False(t, c.CopyCached(dst, off, nil), "CopyCached succeeded with the second block missing")
	_, err = c.ReadAtContext(context.Background(), make([]byte, 1), off+200, nil)
	require.NoError(t, err)
	var tl partial.Tally
	require.True(t, c.CopyCached(dst, off, &tl))
	require.Equal(t, data[off:off+300], dst)
	assert.Equal(t, int64(1), tl.CacheHits, "tally %+v, want one hit", tl)
	tail := make([]byte, 100)
	_, err = c.ReadAtContext(context.Background(), tail, 8*bs, nil)
	require.NoError(t, err)
	if assert.True(t, c.CopyCached(tail, 8*bs, nil), "CopyCached of the short tail block") {
		assert.Equal(t, data[8*bs:], tail, "CopyCached of the short tail block differs")
	}
	for _, bad := range []int64{-1, int64(len(data)) - 50} {
		assert.False(t, c.CopyCached(make([]byte, 100), bad, nil), "CopyCached at %d succeeded", bad)
	}
}

// TestLargeReadBypass: a read of bypassBlocks blocks or more that the
// cache does not hold whole is one inner read, byte for byte, and caches
// nothing; held whole (after Warm), it is served from the cache; a
// shorter read goes block by block.
func TestLargeReadBypass(t *testing.T) {
	const bs = 512
	data := make([]byte, 64*bs+77)
	for i := range data {
		data[i] = byte(i*13 + 5)
	}
	inner := &countingMemory{Memory: partial.NewMemory("mem", data)}
	c, err := NewCached("mem", inner, nil, 1<<20, bs)
	require.NoError(t, err)
	defer c.Close()
	p := make([]byte, bypassBlocks*bs-100) // spans bypassBlocks blocks from offset 300
	_, err = c.ReadAtContext(context.Background(), p, 300, nil)
	require.NoError(t, err)
	assert.Equal(t, data[300:300+len(p)], p)
	assert.Equal(t, int64(1), inner.reads.Load(), "one inner read")
	for b := int64(0); b <= bypassBlocks; b++ {
		assert.False(t, c.table.lookup(b), "block %d not cached", b)
	}
	assert.Equal(t, int64(1), c.Stats().CacheMisses)

	require.NoError(t, c.Warm(context.Background(), 0, int64(len(data))))
	reads := inner.reads.Load()
	clear(p)
	_, err = c.ReadAtContext(context.Background(), p, 300, nil)
	require.NoError(t, err)
	assert.Equal(t, data[300:300+len(p)], p)
	assert.Equal(t, reads, inner.reads.Load(), "held whole: from the cache")

	c2, err := NewCached("mem", inner, nil, 1<<20, bs)
	require.NoError(t, err)
	defer c2.Close()
	reads = inner.reads.Load()
	short := make([]byte, 3*bs)
	_, err = c2.ReadAtContext(context.Background(), short, 1000, nil)
	require.NoError(t, err)
	assert.Equal(t, data[1000:1000+len(short)], short)
	assert.Equal(t, reads+4, inner.reads.Load(), "four blocks, one read each")
	assert.True(t, c2.table.lookup(2))
}

// TestSlotsBoundedUnderLongSections: evicted slots wait for the read
// sections open when they left; with a section that never ends (searches
// long and overlapping, as over an object store) the slots made stay
// within twice the budget and four chunks, reads still return the
// file's bytes, and the blocks that find no slot are simply not cached.
func TestSlotsBoundedUnderLongSections(t *testing.T) {
	const bs = 4096
	data := make([]byte, 2048*bs)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	c, err := NewCached("mem", partial.NewMemory("mem", data), nil, 64<<10, bs)
	require.NoError(t, err)
	defer c.Close()
	require.NotNil(t, c.slots, "a cache smaller than its file keeps slots")
	tok := c.EnterRead() // a search that never ends
	p := make([]byte, 100)
	for blk := int64(0); blk < 2048; blk++ {
		_, err := c.ReadAtContext(context.Background(), p, blk*bs+50, nil)
		require.NoError(t, err)
		require.Equal(t, data[blk*bs+50:blk*bs+150], p)
	}
	c.slots.mu.Lock()
	made := len(c.slots.chunks)
	c.slots.mu.Unlock()
	assert.Equal(t, 4, made, "four chunks of 256 slots (2048 blocks read would take 8), twice the 64 KiB budget being less than a chunk")
	c.ExitRead(tok)
}
