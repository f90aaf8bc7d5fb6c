package hnswsearch

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// TestConcurrentAndBatch: many goroutines (and SearchBatch) on one Index give
// the same answers as one at a time, on zero-copy and copying backends.
func TestConcurrentAndBatch(t *testing.T) {
	var fr faissRuns
	for _, r := range loadRuns(t) {
		if r.Fixture == "hnsw_flat_large" {
			fr = r
		}
	}
	for _, backend := range []string{"mmap", "pread"} {
		s, err := partial.Open(filepath.Join(fixtureDir, "hnsw_flat_large.faiss"), partial.Options{Backend: backend, CacheBytes: 256 << 10})
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
	fr := loadRuns(t)[0]
	for _, r := range loadRuns(t) {
		if r.Fixture == "idmap_hnsw" {
			fr = r
		}
	}
	for _, backend := range []string{"memory", "mmap", "pread"} {
		s, err := partial.Open(filepath.Join(fixtureDir, fr.Fixture+".faiss"), partial.Options{Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, o := range []Options{{}, {Semantics: FAISS173, Kernel: Exact}} {
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
	s, err := partial.Open(path, partial.Options{Backend: "pread", CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := openIndex(t, s, Options{})
	_, first, err := searchOne(x, q, qb, Params{K: 10})
	if err != nil {
		t.Fatal(err)
	}
	_, again, _ := searchOne(x, q, qb, Params{K: 10})
	if first.IO.CacheMisses == 0 || first.IO.DeviceReads != first.IO.CacheMisses || again.IO.CacheMisses != 0 ||
		again.IO.CacheHits < again.Reads {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	d, err := partial.Open(path, partial.Options{Backend: "direct"})
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
	fr := loadRuns(t)[0]
	for _, r := range loadRuns(t) {
		if r.Fixture == "hnsw_flat_large" {
			fr = r
		}
	}
	q, _ := fr.Query(0)
	for _, warm := range []bool{false, true} {
		s, err := partial.Open(filepath.Join(fixtureDir, fr.Fixture+".faiss"), partial.Options{Backend: "pread", CacheBytes: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		x := openIndex(t, s, Options{})
		if warm {
			if err := x.Warm(0); err != nil {
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
	m, err := partial.Open(filepath.Join(fixtureDir, fr.Fixture+".faiss"), partial.Options{Backend: "mmap"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := openIndex(t, m, Options{}).Warm(0); err != nil {
		t.Fatalf("mmap warm: %v", err)
	}
}

// TestPinHubs: a partial pin holds some lists, not all, within its budget,
// and searches give the same answers as without it.
func TestPinHubs(t *testing.T) {
	fr := loadRuns(t)[0]
	for _, r := range loadRuns(t) {
		if r.Fixture == "hnsw_flat_large" {
			fr = r
		}
	}
	s, err := partial.Open(filepath.Join(fixtureDir, fr.Fixture+".faiss"), partial.Options{Backend: "pread"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plain := openIndex(t, s, Options{})
	const budget = 64 << 10
	x := openIndex(t, s, Options{PinBytes: budget})
	pinned := 0
	for _, p := range x.pinPos {
		if p >= 0 {
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
