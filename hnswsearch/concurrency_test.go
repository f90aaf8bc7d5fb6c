package hnswsearch

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// TestConcurrentAndBatch: many goroutines (and SearchBatch) on one Index give
// the same answers as one at a time, on zero-copy and copying backends.
func TestConcurrentAndBatch(t *testing.T) {
	fr := runsOf(t, "hnsw_flat_large")
	for _, backend := range []string{"mmap", "pread"} {
		s, err := storage.Open(context.Background(), filepath.Join(fixtureDir, "hnsw_flat_large.faiss"), storage.Options{Backend: storage.Backend(backend), CacheBytes: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		x := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Exact})
		run := fr.Runs[1]
		p := Params{K: run.K}
		var qs []Query
		for i := range 200 {
			q, _ := fr.Query(i % len(fr.Queries))
			qs = append(qs, Query{Vector: q})
		}
		out := x.SearchBatch(qs, p, 8, nil)
		for i, r := range out {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			sameResults(t, backend, r.Hits, run.IDs[i%len(fr.Queries)], run.Dist[i%len(fr.Queries)])
		}
	}
}

// TestNoAllocationsPerQuery: in steady state a query allocates nothing.
func TestNoAllocationsPerQuery(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocations are expected")
	}
	fr := runsOf(t, "idmap_hnsw")
	for _, backend := range []string{"memory", "mmap", "pread", "direct"} {
		s, err := storage.Open(context.Background(), filepath.Join(fixtureDir, fr.Fixture+".faiss"), storage.Options{Backend: storage.Backend(backend)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		opts := []Options{{}, {Semantics: FAISS173, Kernel: Exact}}
		if backend == "direct" {
			// The bounded-memory policy, small enough that every query
			// still reads vectors in batches (and reads ahead).
			opts = []Options{{BatchReads: true, HeldBytes: vectorCacheFor(t, s, 30) + 8<<10}}
		}
		for _, o := range opts {
			x := openIndex(t, s, o)
			q, _ := fr.Query(0)
			dst := make([]Result, 0, 64)
			filtered := Params{K: 10, EfSearch: 32, Filter: fr.Runs[7].AllowIDs}
			for _, p := range []Params{{K: 10}, {K: 40, EfSearch: 64}, filtered} {
				x.Search(q, p, dst[:0]) // warm the pool and the id map's reverse index
				allocs := testing.AllocsPerRun(50, func() {
					if _, _, err := x.Search(q, p, dst[:0]); err != nil {
						t.Fatal(err)
					}
				})
				if allocs != 0 {
					t.Errorf("%s %v %+v: %.1f allocations per query", backend, o, p, allocs)
				}
				if o.HeldBytes > 0 {
					if _, st, _ := x.Search(q, p, dst[:0]); st.Batches == 0 && !st.ExactScan {
						t.Errorf("%+v: no batched reads: the policy's I/O path went untested", p)
					}
				}
			}
		}
	}
}

// TestPerQueryIO: queries report their own cache hits, misses and device
// reads; a repeated query over a warm cache misses nothing.
func TestPerQueryIO(t *testing.T) {
	fr := loadRuns(t)[0]
	path := filepath.Join(fixtureDir, fr.Fixture+".faiss")
	q, qb := fr.Query(0)
	s, err := storage.Open(context.Background(), path, storage.Options{Backend: "pread", CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := openIndex(t, s, Options{})
	_, first, err := searchOne(x, q, qb, Params{K: 10})
	if err != nil {
		t.Fatal(err)
	}
	before := s.(partial.StatsReporter).Stats()
	_, again, _ := searchOne(x, q, qb, Params{K: 10})
	if first.IO.CacheMisses == 0 || first.IO.DeviceReads != first.IO.CacheMisses || again.IO.CacheMisses != 0 ||
		again.IO.CacheHits < again.Reads {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	// The backend's own counters saw the same hits (zero-copy views are
	// added once per query).
	if after := s.(partial.StatsReporter).Stats(); after.CacheHits-before.CacheHits != again.IO.CacheHits {
		t.Errorf("backend counted %d hits for the query, the query %d", after.CacheHits-before.CacheHits, again.IO.CacheHits)
	}
	d, err := storage.Open(context.Background(), path, storage.Options{Backend: "direct"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	xd := openIndex(t, d, Options{})
	_, st, err := searchOne(xd, q, qb, Params{K: 10})
	if err != nil || st.IO.DeviceReads < st.Reads || st.IO.DeviceBytes < st.BytesRead {
		t.Fatalf("direct: %+v %v", st, err)
	}
}

// TestWarm: after Warm, a query on a cache large enough for the graph and
// the vectors misses nothing; an unwarmed one does.
func TestWarm(t *testing.T) {
	fr := runsOf(t, "hnsw_flat_large")
	q, _ := fr.Query(0)
	for _, warm := range []bool{false, true} {
		s, err := storage.Open(context.Background(), filepath.Join(fixtureDir, fr.Fixture+".faiss"), storage.Options{Backend: "pread", CacheBytes: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		x := openIndex(t, s, Options{})
		if warm {
			if err := x.Warm(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
		}
		_, st, err := x.Search(q, Params{K: 10}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if warm != (st.IO.CacheMisses == 0) {
			t.Errorf("warm=%v: %d cache misses", warm, st.IO.CacheMisses)
		}
		s.Close()
	}
	m, err := storage.Open(context.Background(), filepath.Join(fixtureDir, fr.Fixture+".faiss"), storage.Options{Backend: "mmap"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := openIndex(t, m, Options{}).Warm(context.Background(), 0); err != nil {
		t.Fatalf("mmap warm: %v", err)
	}
}

// TestPinHubs: a partial pin holds some lists, not all, within its budget,
// and searches give the same answers as without it.
func TestPinHubs(t *testing.T) {
	fr := runsOf(t, "hnsw_flat_large")
	s := openFixture(t, fr.Fixture, storage.Options{Backend: "pread"})
	plain := openIndex(t, s, Options{})
	const budget = 64 << 10
	x := openIndex(t, s, Options{hold: holding{hubBytes: budget}})
	pinned := 0
	for _, n0 := range x.pinned.len0 {
		if n0 != notPinned {
			pinned++
		}
	}
	if pinned == 0 || pinned == int(x.n) || x.PinnedBytes() > budget {
		t.Fatalf("%d of %d nodes pinned in %d bytes (budget %d)", pinned, x.n, x.PinnedBytes(), budget)
	}
	for i := range fr.Queries {
		q, _ := fr.Query(i)
		a, _, _ := plain.Search(q, Params{K: 10}, nil)
		b, st, _ := x.Search(q, Params{K: 10}, nil)
		if !slices.Equal(a, b) || st.NDis == 0 {
			t.Fatalf("query %d: pinned %v, plain %v", i, b, a)
		}
	}
}

// TestWarmVectorCache: Warm fills the vector cache with the nodes above
// level 0, so a query's descent through the upper levels reads nothing.
func TestWarmVectorCache(t *testing.T) {
	fr := runsOf(t, "hnsw_flat_large")
	s := openFixture(t, fr.Fixture, storage.Options{Backend: "direct"})
	x := openIndex(t, s, Options{BatchReads: true, hold: holding{allLists: true, cacheBytes: vectorCacheFor(t, s, 2000)}})
	if err := x.Warm(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	upper := 0
	for v := int32(0); v < x.n; v++ {
		if x.h.NumLevels(v) > 1 {
			upper++
			if !x.vc.Contains(v) {
				t.Fatalf("node %d (%d levels) not warmed", v, x.h.NumLevels(v))
			}
		}
	}
	if vs := x.VectorCache(); upper == 0 || vs.Used != upper {
		t.Fatalf("%d upper-level nodes, vector cache %+v", upper, vs)
	}
	q, _ := fr.Query(0)
	_, st, err := x.Search(q, Params{K: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if descent := int64(st.NDis - st.NDisLevel0); descent == 0 || st.VectorCacheHits < descent {
		t.Fatalf("descent computed %d distances, %d from the vector cache", descent, st.VectorCacheHits)
	}
}

// TestPinnedListsCompacted: pinned lists, stored without level 0's −1
// padding, hold every node's lists on every level as the file does, in
// less memory than the section.
func TestPinnedListsCompacted(t *testing.T) {
	for _, fx := range []string{"hnsw_flat_large", "hnsw_flat_l2"} {
		ref := openIndex(t, openFixture(t, fx, storage.Options{Backend: "memory"}), Options{})
		x := openIndex(t, openFixture(t, fx, storage.Options{Backend: "direct"}), Options{hold: holding{allLists: true}})
		if x.PinnedBytes() <= 0 || x.PinnedBytes() >= x.nb.Len+6*int64(x.n) {
			t.Fatalf("%s: %d bytes pinned for a %d-byte section", fx, x.PinnedBytes(), x.nb.Len)
		}
		for v := int32(0); v < x.n; v++ {
			for l := 0; l < x.h.NumLevels(v); l++ {
				want, _ := ref.lists.held(v, l)
				got, ok := x.lists.held(v, l)
				want = want[:4*validPrefix(want)]
				if !ok || !bytes.Equal(got[:4*validPrefix(got)], want) {
					t.Fatalf("%s: node %d level %d: pinned %x, file %x", fx, v, l, got, want)
				}
			}
		}
		t.Logf("%s: %d of %d bytes", fx, x.PinnedBytes(), x.nb.Len)
	}
}
