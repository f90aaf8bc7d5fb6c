package hnswsearch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// probe parses the headers and small arrays of the local FAISS file at
// path through a small block cache, as the engine's probe does before an
// Index is opened.
func probe(tb testing.TB, path string) *faissfmt.File {
	tb.Helper()
	s, err := storage.Open(context.Background(), path, storage.Options{Backend: "pread", CacheBytes: 1 << 20})
	require.NoError(tb, err)
	defer s.Close()
	f, err := faissfmt.OpenWith(partial.ReaderAt(context.Background(), s), s.Size(), faissfmt.OpenOptions{AllowNullStorage: true})
	require.NoError(tb, err, path)
	return f
}

func TestPlanBudget(t *testing.T) {
	f := probe(t, filepath.Join(fixtureDir, "hnsw_flat_large.faiss"))
	_, err := PlanBudget(f, true, 1<<20, 2)
	require.ErrorIs(t, err, ErrBudget, "1 MiB")
	p, err := PlanBudget(f, true, 64<<20, 2)
	require.NoError(t, err)
	assert.Positive(t, p.HeapBytes)
	assert.Equal(t, 64<<20-p.HeapBytes, p.Options.HeldBytes)
	assert.Zero(t, p.BlockCacheBytes, "direct I/O keeps no block cache")
	assert.True(t, p.Options.BatchReads)
	o := Options{Semantics: FAISS173, Kernel: Exact}
	p.Apply(&o)
	assert.Equal(t, Options{Semantics: FAISS173, Kernel: Exact, HeldBytes: p.Options.HeldBytes, BatchReads: true}, o)
	q, err := PlanBudget(f, false, 64<<20, 2)
	require.NoError(t, err)
	assert.Positive(t, q.BlockCacheBytes)
	assert.Equal(t, int64(64<<20), q.Options.HeldBytes+q.BlockCacheBytes+q.HeapBytes, "the parts add up to the budget")
	r, err := PlanBudget(f, true, 64<<20, 8)
	require.NoError(t, err)
	assert.Greater(t, r.HeapBytes, p.HeapBytes, "8 workers need more heap than 2")
}

// TestHeldBytesSplit: the policy pins every list when they fit and gives the
// rest to the vector cache; with less, it pins the hubs' lists in half.
func TestHeldBytesSplit(t *testing.T) {
	s := openFixture(t, "hnsw_flat_large", storage.Options{Backend: "direct"})
	full := openIndex(t, s, Options{hold: holding{allLists: true}})
	lists := full.PinnedBytes()
	x := openIndex(t, s, Options{HeldBytes: lists * 3, BatchReads: true})
	h := x.Options().hold
	assert.True(t, h.allLists, "roomy: %+v", h)
	assert.Equal(t, lists, x.PinnedBytes())
	assert.Equal(t, lists*2, h.cacheBytes, "the vector cache gets the rest")
	assert.InDelta(t, lists*2, x.VectorCache().Bytes, float64(lists)/100, "the cache holds what it was given, in whole slots")
	all := openIndex(t, s, Options{HeldBytes: 2 * s.Size(), BatchReads: true})
	h = all.Options().hold
	assert.True(t, h.allLists && h.vectors, "everything fits: %+v", h)
	assert.Nil(t, all.vc)
	assert.Nil(t, all.batch)
	assert.IsType(t, &memVectors{}, all.vecs, "pinned vectors are read in place")
	fr := runsOf(t, "hnsw_flat_large")
	q, _ := fr.Query(0)
	_, st, err := all.Search(q, Params{K: 10}, nil)
	require.NoError(t, err)
	assert.Zero(t, st.Reads, "everything pinned, yet the query read")
	assert.Zero(t, st.IO.DeviceReads)
	y := openIndex(t, s, Options{HeldBytes: lists / 2, BatchReads: true})
	h = y.Options().hold
	assert.False(t, h.allLists, "tight: %+v", h)
	assert.Equal(t, lists/4, h.hubBytes)
	assert.LessOrEqual(t, y.PinnedBytes(), lists/4)
	assert.Positive(t, y.PinnedBytes())
}

// TestHeldBytesIDMap: the policy pins an id map, so results read nothing.
func TestHeldBytesIDMap(t *testing.T) {
	s := openFixture(t, "idmap_hnsw", storage.Options{Backend: "direct"})
	x := openIndex(t, s, Options{HeldBytes: 1 << 20, BatchReads: true})
	if x.idView == nil || x.PinnedBytes() < x.idMap.Len {
		t.Fatalf("id map not pinned: %d bytes pinned", x.PinnedBytes())
	}
	fr := runsOf(t, "idmap_hnsw")
	q, _ := fr.Query(0)
	res, _, err := x.Search(q, Params{K: 10}, nil)
	if err != nil || len(res) == 0 || res[0].ID != fr.Runs[1].IDs[0][0] {
		t.Fatalf("%v %v, FAISS %v", res, err, fr.Runs[1].IDs[0])
	}
}

// TestPinsAllListsBeforeOpen: EstimatePinnedLists on the probed file is
// the estimate an opened Index plans with, and PinsAllLists agrees with
// what a guide-walked Index then pins, on either side of the threshold.
func TestPinsAllListsBeforeOpen(t *testing.T) {
	path := filepath.Join(fixtureDir, "hnsw_flat_large.faiss")
	f := probe(t, path)
	s := openFixture(t, "hnsw_flat_large", storage.Options{Backend: "direct"})
	est, err := EstimatePinnedLists(context.Background(), f, s)
	require.NoError(t, err)
	x := openIndex(t, s, Options{})
	want, err := x.estimatePinnedAll(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, est)
	lists := openIndex(t, s, Options{hold: holding{allLists: true}}).PinnedBytes()
	assert.InDelta(t, lists, est, float64(lists)/5, "the estimate is near what pinning holds")

	g := newExactGuide(t, s)
	for _, held := range []int64{est * 10 / 9, est*10/9 + 10, est * 10 / 9 * 99 / 100, est / 2} {
		fits := PinsAllLists(f, held, est)
		y := openIndex(t, s, Options{HeldBytes: held, BatchReads: true, Guide: g})
		assert.Equal(t, fits, y.Options().hold.allLists, "held %d, estimate %d", held, est)
	}
	assert.True(t, PinsAllLists(f, est*10/9+10, est))
	assert.False(t, PinsAllLists(f, est/2, est))
}

// TestStreamNeighbors: the streaming pass hands every node its record as
// stored, whatever the step (records cut by a step are carried into the
// next read, which continues where the last ended) and the read-ahead's
// chunk (1 MiB, or 64 KiB under a small budget), through the direct
// backend's aligned read-ahead and through mmap.
func TestStreamNeighbors(t *testing.T) {
	path := filepath.Join(fixtureDir, "hnsw_flat_large.faiss")
	for _, backend := range []string{"direct-uncached", "mmap"} {
		x := openIndex(t, openBackend(t, path, backend), Options{})
		ref := openBackend(t, path, "pread")
		for _, step := range []int64{1, 100, 4096, 5000, 1 << 20} {
			x.opts.HeldBytes = 0
			if step == 5000 {
				x.opts.HeldBytes = 1 << 20 // 64 KiB chunks
			}
			next := int32(0)
			err := x.streamNeighborsBy(context.Background(), step, func(v int32, rec []byte) {
				require.Equal(t, next, v, "nodes in order")
				next++
				lo, hi := x.h.NodeOffset(int64(v))*4, x.h.NodeOffset(int64(v)+1)*4
				want := make([]byte, hi-lo)
				_, err := ref.ReadAtContext(context.Background(), want, x.nb.Offset+lo, nil)
				require.NoError(t, err)
				require.Equal(t, want, rec, "%s step %d node %d", backend, step, v)
			})
			require.NoError(t, err)
			require.Equal(t, x.n, next, "%s step %d: every node", backend, step)
		}
	}
}

// TestStreamChunk: the pinning pass reads ahead in 1 MiB chunks, or in a
// 32nd of the bytes a budget holds outside the heap when that is less
// (aligned), down to 64 KiB.
func TestStreamChunk(t *testing.T) {
	x := &Index{}
	for _, c := range []struct{ held, want int64 }{
		{0, 1 << 20}, {1 << 30, 1 << 20}, {32 << 20, 1 << 20}, {8 << 20, 256 << 10},
		{8<<20 + 4096*32 + 100, 256<<10 + 4096}, {1 << 20, 64 << 10}, {1, 64 << 10},
	} {
		x.opts.HeldBytes = c.held
		require.Equal(t, c.want, x.streamChunk(), "held %d", c.held)
	}
}
