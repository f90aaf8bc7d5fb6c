package hnswsearch

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

func TestPlanBudget(t *testing.T) {
	f, err := Probe(filepath.Join(fixtureDir, "hnsw_flat_large.faiss"), "direct")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PlanBudget(f, "direct", 1<<20, 2); !errors.Is(err, ErrBudget) {
		t.Fatalf("1 MiB: %v, want ErrBudget", err)
	}
	p, err := PlanBudget(f, "direct", 64<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.HeapBytes <= 0 || p.Options.HeldBytes != 64<<20-p.HeapBytes || p.BlockCacheBytes != 0 || !p.Options.BatchReads {
		t.Fatalf("direct plan %+v", p)
	}
	o := Options{Semantics: FAISS173, Kernel: Exact}
	p.Apply(&o)
	if o != (Options{Semantics: FAISS173, Kernel: Exact, HeldBytes: p.Options.HeldBytes, BatchReads: true}) {
		t.Fatalf("Apply: %+v", o)
	}
	q, err := PlanBudget(f, "pread", 64<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	if q.BlockCacheBytes <= 0 || q.Options.HeldBytes+q.BlockCacheBytes+q.HeapBytes != 64<<20 {
		t.Fatalf("pread plan %+v: the parts must add up to the budget", q)
	}
	if r, err := PlanBudget(f, "direct", 64<<20, 8); err != nil || r.HeapBytes <= p.HeapBytes {
		t.Fatalf("8 workers: heap %d (2 workers: %d), %v", r.HeapBytes, p.HeapBytes, err)
	}
}

// TestHeldBytesSplit: the policy pins every list when they fit and gives the
// rest to the vector cache; with less, it pins the hubs' lists in half.
func TestHeldBytesSplit(t *testing.T) {
	s := openFixture(t, "hnsw_flat_large", partial.Options{Backend: "direct"})
	full := openIndex(t, s, Options{PinNeighbors: true})
	lists := full.PinnedBytes()
	x := openIndex(t, s, Options{HeldBytes: lists * 3, BatchReads: true})
	if o := x.Options(); !o.PinNeighbors || x.PinnedBytes() != lists || o.VectorCacheBytes != lists*2 {
		t.Fatalf("roomy: %+v, %d pinned", o, x.PinnedBytes())
	}
	all := openIndex(t, s, Options{HeldBytes: 2 * s.Size(), BatchReads: true})
	if o := all.Options(); !o.PinNeighbors || !o.PinVectors || all.vc != nil || all.batch != nil || all.codesView == nil {
		t.Fatalf("everything fits: %+v", o)
	}
	fr := runsOf(t, "hnsw_flat_large")
	q, _ := fr.Query(0)
	if _, st, err := all.Search(q, Params{K: 10}, nil); err != nil || st.Reads != 0 || st.IO.DeviceReads != 0 {
		t.Fatalf("everything pinned, yet a query read %d times: %v", st.Reads, err)
	}
	y := openIndex(t, s, Options{HeldBytes: lists / 2, BatchReads: true})
	if o := y.Options(); o.PinNeighbors || o.PinBytes != lists/4 || y.PinnedBytes() > lists/4 || y.PinnedBytes() == 0 {
		t.Fatalf("tight: %+v, %d pinned", o, y.PinnedBytes())
	}
}

// TestHeldBytesIDMap: the policy pins an id map, so results read nothing.
func TestHeldBytesIDMap(t *testing.T) {
	s := openFixture(t, "idmap_hnsw", partial.Options{Backend: "direct"})
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
