package blockcache_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// TestIOErrorsNameTheOffset: an EIO from below reaches the caller with the
// offset in the message, through the block cache.
func TestIOErrorsNameTheOffset(t *testing.T) {
	m := partial.NewMemory("mem", make([]byte, 100000))
	bad := &partialtest.Faulty{Storage: m, Fail: partialtest.EIOAt(50000)}
	c, err := blockcache.NewCached("faulty.bin", bad, nil, 1<<20, 4096)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ReadAtContext(context.Background(), make([]byte, 10), 10, nil)
	require.NoError(t, err, "healthy block")
	_, err = c.ReadAtContext(context.Background(), make([]byte, 100), 49990, nil)
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorContains(t, err, "offset 49152", "the block's offset")
	require.ErrorContains(t, err, "faulty.bin")
	// The failed block was not cached: a later read retries the device.
	bad.Fail = func(off, n int64) error { return nil }
	_, err = c.ReadAtContext(context.Background(), make([]byte, 100), 49990, nil)
	require.NoError(t, err, "after the fault cleared")
}

// TestCachedBatchAttribution: a batch reads its missing blocks once and
// counts each as a miss of the first request that reads it; requests
// sharing a block count a hit. A nil-tally ViewBlock (a peek) counts nothing.
func TestCachedBatchAttribution(t *testing.T) {
	path, want := partialtest.PatternFile(t, 64<<10)
	s, err := storage.Open(context.Background(), path, storage.Options{Backend: "direct", CacheBytes: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	c := s.(*blockcache.Cached)
	reqs := []partial.ReadReq{
		{Off: 100, Buf: make([]byte, 50)},          // block 0
		{Off: 200, Buf: make([]byte, 50)},          // block 0 again
		{Off: 5*4096 + 10, Buf: make([]byte, 100)}, // block 5
		{Off: 9*4096 - 10, Buf: make([]byte, 20)},  // blocks 8 and 9
	}
	require.NoError(t, c.ReadBatch(context.Background(), reqs))
	var tot partial.Tally
	for _, q := range reqs {
		require.Equal(t, want[q.Off:q.Off+int64(len(q.Buf))], q.Buf, "request at %d", q.Off)
		tot.CacheHits += q.IO.CacheHits
		tot.CacheMisses += q.IO.CacheMisses
	}
	require.Equal(t, int64(4), tot.CacheMisses, "misses: blocks 0, 5, 8, 9")
	require.Equal(t, int64(1), tot.CacheHits, "hits: block 0 again")
	require.Equal(t, int64(1), reqs[1].IO.CacheHits, "block 0 again")
	before := c.Stats()
	_, ok := c.ViewBlock(100, 10, nil)
	require.True(t, ok, "block 0 not cached")
	require.Equal(t, before, c.Stats(), "a peek changed the stats")
	st := c.Stats()
	assert.Equal(t, int64(4), st.CacheMisses, "backend stats")
	assert.Equal(t, int64(1), st.CacheHits, "backend stats")
}
