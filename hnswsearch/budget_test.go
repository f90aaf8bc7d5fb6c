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
	s, err := partial.Open(filepath.Join(fixtureDir, "hnsw_flat_large.faiss"), partial.Options{Backend: "direct"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	full := openIndex(t, s, Options{PinNeighbors: true})
	lists := full.PinnedBytes()
	x := openIndex(t, s, Options{HeldBytes: lists * 3, BatchReads: true})
	if o := x.Options(); !o.PinNeighbors || x.PinnedBytes() != lists || o.VectorCacheBytes != lists*2 {
		t.Fatalf("roomy: %+v, %d pinned", o, x.PinnedBytes())
	}
	y := openIndex(t, s, Options{HeldBytes: lists / 2, BatchReads: true})
	if o := y.Options(); o.PinNeighbors || o.PinBytes != lists/4 || y.PinnedBytes() > lists/4 || y.PinnedBytes() == 0 {
		t.Fatalf("tight: %+v, %d pinned", o, y.PinnedBytes())
	}
}
