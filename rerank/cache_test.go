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

// TestBufListSurvivesCollection: working memory given back is taken again
// after a collection (a sync.Pool would have dropped it), and at most
// maxFreeBufs are kept.
func TestBufListSurvivesCollection(t *testing.T) {
	var a bufList
	b := &bufs{raw: make([]byte, 1000)}
	a.give(b)
	runtime.GC()
	runtime.GC()
	require.Same(t, b, a.take(500))
	require.NotSame(t, b, a.take(1), "taken already")
	for range 2 * maxFreeBufs {
		a.give(&bufs{raw: make([]byte, 10)})
	}
	require.Len(t, a.free, maxFreeBufs)
}

// TestBufListReplacesSmall: one shortlist at a time, each a little larger
// than the last, keeps one read buffer (a too-small one is replaced, not
// kept beside its replacement), and take picks the smallest buffer that
// fits, leaving larger ones for larger shortlists.
func TestBufListReplacesSmall(t *testing.T) {
	var a bufList
	s := &Store{}
	for n := minArena; n < 3*minArena; n += minArena / 7 {
		b := a.take(n)
		require.Len(t, s.rawN(b, n), n)
		a.give(b)
		require.Len(t, a.free, 1, "after a shortlist of %d", n)
	}
	a.free = nil
	small, large := &bufs{raw: make([]byte, 100)}, &bufs{raw: make([]byte, 1000)}
	a.give(large)
	a.give(small)
	require.Same(t, small, a.take(50), "the smallest that fits")
	a.give(small)
	require.Same(t, large, a.take(500), "the only one that fits")
	require.Same(t, small, a.take(5000), "none fits: the largest kept, to be made larger")
}
