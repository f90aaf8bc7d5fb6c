package hnswsearch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// batchFaults is a storage whose batches fail while fail is set: every
// request (whole), or the lists read ahead only (ahead).
type batchFaults struct {
	partial.Storage
	br      localDevice
	fail    atomic.Int32
	batches atomic.Int64
}

const (
	failNone int32 = iota
	failWhole
	failAhead
)

var errBatch = errors.New("injected batch failure")

func (f *batchFaults) Alignment() int64 { return f.br.Alignment() }

func (f *batchFaults) ReadBatch(ctx context.Context, reqs []partial.ReadReq) error {
	f.batches.Add(1)
	switch f.fail.Load() {
	case failWhole:
		for i := range reqs {
			reqs[i].Err = errBatch
		}
		return errBatch
	case failAhead:
		err := f.br.ReadBatch(ctx, reqs[:1])
		for i := 1; i < len(reqs); i++ {
			reqs[i].Err = errBatch
		}
		if len(reqs) > 1 {
			return cmp.Or(err, errBatch)
		}
		return err
	}
	return f.br.ReadBatch(ctx, reqs)
}

// listAheadIndex opens fixture fx on the direct backend without a block
// cache, walked on an exact guide, with the lists of the most-linked nodes
// within hub bytes pinned: the rest are read from storage, a batch at a
// time.
func listAheadIndex(t *testing.T, fx string, hub int64) (*Index, *batchFaults) {
	s := openFixture(t, fx, storage.Options{Backend: "direct"})
	br, ok := s.(localDevice)
	require.True(t, ok, "direct is a local device")
	f := &batchFaults{Storage: s, br: br}
	o := Options{Semantics: FAISS173, Kernel: Exact, BatchReads: true, Guide: newExactGuide(t, s)}
	o.hold.hubBytes = hub
	x := openIndex(t, f, o)
	require.NotNil(t, x.listBatch, "list read-ahead applies")
	return x, f
}

// TestListAheadParity: with lists read ahead, searches return FAISS's ids
// and distances bit for bit, lists read ahead are used (and never more
// than were read), and the same searches without read-ahead read the same
// lists one at a time: each expansion's list is read once either way.
func TestListAheadParity(t *testing.T) {
	for fx, hub := range map[string]int64{"hnsw_flat_large": 64 << 10, "idmap_hnsw": 16 << 10} {
		t.Run(fx, func(t *testing.T) {
			fr := runsOf(t, fx)
			x, _ := listAheadIndex(t, fx, hub)
			y, _ := listAheadIndex(t, fx, hub)
			y.listBatch = nil
			var ahead, used int64
			for ri, run := range fr.Runs {
				p := runParams(run)
				for qi := range fr.Queries {
					q, _ := fr.Query(qi)
					res, st, err := x.Search(q, p, nil)
					require.NoError(t, err)
					requireFAISSHits(t, run, qi, res, fmt.Sprintf("run %d query %d", ri, qi))
					_, one, err := y.Search(q, p, nil)
					require.NoError(t, err)
					require.Zero(t, one.ListsAhead)
					require.Equal(t, one.Expanded, st.Expanded, "the same walk")
					require.Equal(t, one.NDisLevel0, st.NDisLevel0, "the same lists")
					require.LessOrEqual(t, st.ListsAheadUsed, st.ListsAhead)
					require.Equal(t, one.Reads, st.Reads-st.ListsAhead+st.ListsAheadUsed,
						"run %d query %d: the lists read one at a time are those the walk expanded: %+v", ri, qi, st)
					ahead += st.ListsAhead
					used += st.ListsAheadUsed
				}
			}
			assert.Positive(t, used, "lists read ahead were used")
			t.Logf("%s: %d lists read ahead, %d used", fx, ahead, used)
		})
	}
}

// TestListAheadBatchError: a batch whose expanded node's list fails fails
// the search with an error naming the node; one where only lists read ahead fail answers
// as if they had not been read ahead; nothing is left behind: once the
// storage recovers, the same search returns what it returned before.
func TestListAheadBatchError(t *testing.T) {
	fr := runsOf(t, "hnsw_flat_large")
	x, f := listAheadIndex(t, "hnsw_flat_large", 64<<10)
	p := Params{K: 10, EfSearch: 64}
	for qi := range 4 {
		q, _ := fr.Query(qi)
		want, st, err := x.Search(q, p, nil)
		require.NoError(t, err)
		require.Positive(t, st.ListsAhead)
		f.fail.Store(failWhole)
		before := f.batches.Load()
		_, _, err = x.Search(q, p, nil)
		require.ErrorIs(t, err, errBatch)
		require.ErrorContains(t, err, "reading the neighbors of node")
		require.Greater(t, f.batches.Load(), before, "the search read a batch")
		f.fail.Store(failAhead)
		got, ahead, err := x.Search(q, p, nil)
		require.NoError(t, err, "lists read ahead failing fail nothing")
		require.Equal(t, want, got)
		require.Zero(t, ahead.ListsAheadUsed, "no list whose read failed is used")
		f.fail.Store(failNone)
		got, _, err = x.Search(q, p, nil)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// TestListAheadScope: read-ahead applies to a local O_DIRECT file (a
// localDevice) only: not to another batch reader (an object store's), and
// not above maxAheadPool candidates, where the list is read alone.
func TestListAheadScope(t *testing.T) {
	s := openFixture(t, "hnsw_flat_large", storage.Options{Backend: "direct"})
	o := Options{Semantics: FAISS173, Kernel: Exact, BatchReads: true, Guide: newExactGuide(t, s)}
	o.hold.hubBytes = 64 << 10
	other := struct {
		partial.Storage
		partial.BatchReader
	}{s, s.(partial.BatchReader)}
	require.Nil(t, openIndex(t, other, o).listBatch, "a batch reader that is not a local device")

	x, _ := listAheadIndex(t, "hnsw_flat_large", 64<<10)
	var v0 int32 = -1
	for v := range x.n {
		if _, ok := x.lists.held(v, 0); !ok {
			v0 = v
			break
		}
	}
	require.GreaterOrEqual(t, v0, int32(0))
	b, e := x.h.NeighborSlots(v0, 0)
	want := make([]byte, (e-b)*4)
	_, err := x.st.ReadAtContext(context.Background(), want, x.nb.Offset+b*4, nil)
	require.NoError(t, err)
	for _, size := range []int{16, maxAheadPool + 1} {
		s := x.newScratch()
		var pl pool
		pl.reset(size, false)
		for i := range size {
			pl.push(int32(i)%x.n, float32(i))
		}
		list, err := x.levelZeroList(s, &pl, v0, size)
		require.NoError(t, err)
		require.Equal(t, want, list)
		if size > maxAheadPool {
			require.Zero(t, s.st.ListsAhead, "a pool of %d: read alone", size)
		} else {
			require.Positive(t, s.st.ListsAhead, "a pool of %d: read with the next", size)
		}
	}
}

// TestPickAhead: the pool's unexpanded candidates are taken nearest first
// (ties: the lower id), skipping popped slots, lists held in memory and
// lists stashed already, up to listAheadWidth−1 of them.
func TestPickAhead(t *testing.T) {
	x, _ := listAheadIndex(t, "hnsw_flat_large", 64<<10)
	var held []int32
	for v := int32(0); v < x.n && len(held) < 2; v++ {
		if _, ok := x.lists.held(v, 0); ok {
			held = append(held, v)
		}
	}
	require.Len(t, held, 2, "the fixture has pinned hubs")
	var notHeld []int32
	for v := int32(0); v < x.n && len(notHeld) < 6; v++ {
		if _, ok := x.lists.held(v, 0); !ok {
			notHeld = append(notHeld, v)
		}
	}
	require.Len(t, notHeld, 6)
	a, b, c, d, e, g := notHeld[0], notHeld[1], notHeld[2], notHeld[3], notHeld[4], notHeld[5]
	s := x.newScratch()
	var pl pool
	pl.reset(16, false)
	pl.push(e, 5)
	pl.push(held[0], 0.5) // held: skipped
	pl.push(b, 2)
	pl.push(a, 2) // ties with b: the lower id first
	pl.push(g, 0.1)
	pl.push(c, 3)
	pl.push(held[1], 1)
	pl.push(d, 0.2)
	popped, _, _ := pl.popMin() // g: expanded, not a candidate
	require.Equal(t, g, popped)
	s.lstash.free(1)
	s.lstash.slot(d, 8) // d: read ahead already
	got := x.pickAhead(s, &pl, []int32{g}, 16)
	lo, hi := min(a, b), max(a, b)
	require.Equal(t, []int32{g, lo, hi, c}[:listAheadWidth], got)
}

// TestPickAheadStopRule: with a pool larger than the stop rule's ef, a
// candidate with ef slots below it (popped or not) is never expanded, and
// its list is not read ahead; one with fewer is.
func TestPickAheadStopRule(t *testing.T) {
	x, _ := listAheadIndex(t, "hnsw_flat_large", 64<<10)
	var free []int32
	for v := int32(0); v < x.n && len(free) < 8; v++ {
		if _, ok := x.lists.held(v, 0); !ok {
			free = append(free, v)
		}
	}
	require.Len(t, free, 8)
	const ef = 4
	s := x.newScratch()
	var pl pool
	pl.reset(16, false)
	for i, v := range free[:3] { // expanded: popped slots at 0, 1, 2
		pl.push(v, float32(i))
	}
	for range 3 {
		pl.popMin()
	}
	pl.push(free[3], 2.5) // 3 slots below: may be expanded
	pl.push(free[4], 3.5) // 4 below (three popped, 2.5): never expanded
	pl.push(free[5], 4.5)
	got := x.pickAhead(s, &pl, nil, ef)
	require.Equal(t, []int32{free[3]}, got)
	got = x.pickAhead(s, &pl, nil, 16) // a pool no larger than ef: no cut
	require.Equal(t, []int32{free[3], free[4], free[5]}[:listAheadWidth-1], got)
}

// TestListStash: a full stash makes room for a batch by dropping as many
// lists as the batch needs, those stashed longest first (a slot freed by a
// hit and refilled holds the newest list), each of the batch's lists gets
// a slot of its own (a slot freed and refilled within one batch is not
// handed out twice), and a list is taken once.
func TestListStash(t *testing.T) {
	var st listStash
	st.clear()
	size := 2 * listAheadWidth
	st.free(size)
	for v := range int32(size) {
		copy(st.slot(v, 4), []byte{byte(v), 0, 0, 0})
	}
	_, ok := st.take(0)
	require.True(t, ok)
	st.free(1)
	st.slot(50, 4) // the newest, in node 0's slot
	st.free(3)
	for v := range int32(size) {
		require.Equal(t, v >= 4, st.holds(v), "node %d: the three stashed longest (1, 2, 3) dropped", v)
	}
	require.True(t, st.holds(50), "the newest kept")
	a, b, c := st.slot(100, 4), st.slot(101, 4), st.slot(102, 4)
	copy(a, "aaaa")
	copy(b, "bbbb")
	copy(c, "cccc")
	for v, want := range map[int32]string{100: "aaaa", 101: "bbbb", 102: "cccc"} {
		got, ok := st.take(v)
		require.True(t, ok)
		require.Equal(t, want, string(got), "node %d", v)
		_, ok = st.take(v)
		require.False(t, ok, "taken once")
	}
}

// BenchmarkPickAhead: picking the lists to read ahead scans the pool once,
// against distance.MinSlot2, the scan popMin makes of it (half the pool
// popped, as mid-search; the stop rule's ef two thirds of the pool, so the
// stop rule's pass runs too): the cost that bounds read-ahead to
// maxAheadPool candidates.
func BenchmarkPickAhead(b *testing.B) {
	s := openFixture(b, "hnsw_flat_large", storage.Options{Backend: "direct"})
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	require.NoError(b, err)
	x, err := New(context.Background(), f, s, Options{BatchReads: true})
	require.NoError(b, err)
	b.Cleanup(func() { x.Close() })
	for _, ef := range []int{64, maxAheadPool, 10000} {
		var c pool
		c.reset(ef, true)
		for i := range ef {
			c.push(int32(i*7919)%x.n, float32(i*104729%ef))
		}
		for range ef / 2 {
			c.popMin()
		}
		sc := x.newScratch()
		ids := make([]int32, 0, listAheadWidth)
		b.Run(fmt.Sprintf("ef=%d/pickAhead", ef), func(b *testing.B) {
			for range b.N {
				ids = x.pickAhead(sc, &c, ids[:0], ef*2/3)
			}
		})
		b.Run(fmt.Sprintf("ef=%d/popMinScan", ef), func(b *testing.B) {
			for range b.N {
				distance.MinSlot2(c.dis[:c.k], c.ids[:c.k])
			}
		})
	}
}
