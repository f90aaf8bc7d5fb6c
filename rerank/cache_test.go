package rerank

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/partial/recordcache"
	"github.com/stretchr/testify/require"
)

// TestStoreCache: with a vector cache, every strategy rescoring a shortlist
// gives the same hits as without; the vectors it read are then served by
// the cache (counted as hits, not reads), and a cache smaller than the
// shortlist still gives the same hits.
func TestStoreCache(t *testing.T) {
	src := filepath.Join(fixtures, "hnsw_flat_large.faiss") // 3000 × 64
	l, want := flatVectors(t, src)
	q := want[42]
	labels := []int32{2999, 0, 17, 18, 19, 1500, 42, 2998, 7, 1234}
	for _, strat := range Strategies {
		plain, err := Open(src, strat)
		require.NoError(t, err)
		wantHits, err := plain.Rescore(q, labels, 5, false, nil)
		require.NoError(t, err)
		require.NoError(t, plain.Close())

		for _, slots := range []int{len(labels), 3} {
			s, err := Open(src, strat)
			require.NoError(t, err)
			c, err := recordcache.New(int(l.Count), 4*l.Dim, 4*l.Count+int64(slots*(4*l.Dim+64)))
			require.NoError(t, err)
			if slots == 3 {
				require.Less(t, c.Stats().Slots, len(labels))
			} else {
				require.GreaterOrEqual(t, c.Stats().Slots, len(labels))
			}
			s.SetCache(c)
			for pass := range 3 {
				var st FetchStats
				got, err := s.Rescore(q, labels, 5, false, &st)
				require.NoError(t, err)
				require.Equal(t, wantHits, got, "%s, %d slots, pass %d", strat, slots, pass)
				require.Equal(t, len(labels), st.Vectors)
				switch {
				case pass == 0:
					require.Zero(t, st.CacheHits, strat)
					require.Positive(t, st.Reads, strat)
				case c.Stats().Slots >= len(labels):
					require.Equal(t, len(labels), st.CacheHits, "%s pass %d", strat, pass)
					require.Zero(t, st.Reads, "%s pass %d", strat, pass)
					require.Zero(t, st.BytesRead, "%s pass %d", strat, pass)
				default:
					require.LessOrEqual(t, st.CacheHits, c.Stats().Slots, strat)
				}
			}
			// Fetch decodes the cached bytes as it decodes read ones.
			got := make([]float32, len(labels)*l.Dim)
			require.NoError(t, s.Fetch(labels, got, nil))
			for i, lb := range labels {
				require.Equal(t, want[lb], got[i*l.Dim:(i+1)*l.Dim], "%s label %d", strat, lb)
			}
			require.NoError(t, s.Close())
			require.NoError(t, c.Close())
		}
	}
}

// TestArenaListSurvivesCollection: a read buffer given back is taken again
// after a collection (a sync.Pool would have dropped it), one at most
// maxFreeArenas are kept, and a buffer too small for a request is not
// handed out.
func TestArenaListSurvivesCollection(t *testing.T) {
	var a arenaList
	b := make([]byte, 1000)
	a.give(b)
	runtime.GC()
	runtime.GC()
	got := a.take(500)
	require.Len(t, got, 500)
	require.Equal(t, &b[0], &got[0])
	require.Nil(t, a.take(1), "taken already")

	a.give(b)
	require.Nil(t, a.take(1001), "too small")
	for range 2 * maxFreeArenas {
		a.give(make([]byte, 10))
	}
	require.Len(t, a.free, maxFreeArenas)
}

// TestArenaListReplacesSmall: one shortlist at a time, each a little larger
// than the last, keeps one buffer (a too-small one is dropped when its
// replacement is made, not kept beside it), and take picks the smallest
// buffer that fits, leaving larger ones for larger shortlists.
func TestArenaListReplacesSmall(t *testing.T) {
	var a arenaList
	for n := 1000; n < 1100; n += 10 {
		b := a.take(n)
		if b == nil {
			b = make([]byte, n)
		}
		a.give(b)
		require.Len(t, a.free, 1, "after a shortlist of %d", n)
	}
	a.free = nil
	small, large := make([]byte, 100), make([]byte, 1000)
	a.give(large)
	a.give(small)
	require.Equal(t, &small[0], &a.take(50)[0], "the smallest that fits")
	require.Equal(t, &large[0], &a.take(50)[0], "the only one left")
}
