package partial

import (
	"bytes"
	"testing"
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
	c, err := NewCached("mem", NewMemory("mem", data), nil, 16*2*bs, bs) // two blocks per shard
	if err != nil {
		t.Fatal(err)
	}
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
		if _, err := c.ReadAt(buf, blk*bs); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.ViewBlock(a*bs, bs, nil); !ok { // a: oldest, but referenced
		t.Fatal("block a not cached")
	}
	if _, err := c.ReadAt(buf, d*bs); err != nil { // evicts one of a, b
		t.Fatal(err)
	}
	if _, ok := c.ViewBlock(a*bs, 1, nil); !ok {
		t.Error("the referenced block was evicted")
	}
	if _, ok := c.ViewBlock(b*bs, 1, nil); ok {
		t.Error("the unreferenced block stayed")
	}
	if _, ok := c.ViewBlock(d*bs, 1, nil); !ok {
		t.Error("the new block is not cached")
	}
}

// TestCopyCached: a range across a block boundary is copied only when both
// blocks are cached, byte for byte, and counted as a hit.
func TestCopyCached(t *testing.T) {
	const bs = 512
	data := make([]byte, 8*bs+100)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	c, err := NewCached("mem", NewMemory("mem", data), nil, 1<<20, bs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dst := make([]byte, 300)
	off := int64(3*bs - 100)
	if c.CopyCached(dst, off, nil) {
		t.Fatal("CopyCached succeeded on an empty cache")
	}
	if _, err := c.ReadAt(make([]byte, 1), off); err != nil { // first block only
		t.Fatal(err)
	}
	if c.CopyCached(dst, off, nil) {
		t.Fatal("CopyCached succeeded with the second block missing")
	}
	if _, err := c.ReadAt(make([]byte, 1), off+200); err != nil {
		t.Fatal(err)
	}
	var tl Tally
	if !c.CopyCached(dst, off, &tl) || !bytes.Equal(dst, data[off:off+300]) {
		t.Fatalf("CopyCached = %x, want %x", dst[:8], data[off:off+8])
	}
	if tl.CacheHits != 1 {
		t.Errorf("tally %+v, want one hit", tl)
	}
	tail := make([]byte, 100)
	if _, err := c.ReadAt(tail, 8*bs); err != nil {
		t.Fatal(err)
	}
	if !c.CopyCached(tail, 8*bs, nil) || !bytes.Equal(tail, data[8*bs:]) {
		t.Error("CopyCached of the short tail block differs")
	}
	for _, bad := range []int64{-1, int64(len(data)) - 50} {
		if c.CopyCached(make([]byte, 100), bad, nil) {
			t.Errorf("CopyCached at %d succeeded", bad)
		}
	}
}
