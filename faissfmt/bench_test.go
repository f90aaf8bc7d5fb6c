package faissfmt

import (
	"bytes"
	"os"
	"runtime"
	"testing"
)

// BenchmarkOpenLarge opens a large FAISS HNSW index (page-cache warm) and
// reports the heap the opened File keeps per vector. Generate the data with
//
//	/usr/bin/python3 bench/gen_hnsw.py --n 1000000 --d 32 --M 16 --out bench-data/hnsw_1m_d32.faiss
//
// and run: go test -run='^$' -bench=OpenLarge ./faissfmt
func BenchmarkOpenLarge(b *testing.B) {
	path := os.Getenv("FAISS_SIDECAR_LARGE_INDEX")
	if path == "" {
		path = "../bench-data/hnsw_1m_d32.faiss"
	}
	fh, err := os.Open(path)
	if err != nil {
		b.Skipf("no large index (%v); see the benchmark's comment", err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(fh, st.Size()); err != nil {
			b.Fatal(err)
		}
	}
	// Heap kept by one opened File, measured by the runtime after GC.
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := Open(fh, st.Size())
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := float64(f.Graph.NTotal)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/vector")
	b.ReportMetric(float64(f.ResidentBytes())/n, "estimated-B/vector")
	runtime.KeepAlive(f)
}

// BenchmarkCheckNeighborsLarge times the load-time neighbor-list check of
// the large index of BenchmarkOpenLarge over its neighbors section in
// memory (what mode full runs) and streamed from the file (page cache warm).
//
//	go test -run='^$' -bench=CheckNeighborsLarge ./faissfmt
func BenchmarkCheckNeighborsLarge(b *testing.B) {
	path := os.Getenv("FAISS_SIDECAR_LARGE_INDEX")
	if path == "" {
		path = "../bench-data/hnsw_1m_d32.faiss"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Skipf("no large index (%v); see BenchmarkOpenLarge", err)
	}
	f, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	h := f.Graph.HNSW
	nb := data[h.Neighbors.Offset : h.Neighbors.Offset+h.Neighbors.Len]
	b.Run("bytes", func(b *testing.B) {
		b.SetBytes(int64(len(nb)))
		for b.Loop() {
			if err := h.CheckNeighborBytes(nb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		fh, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer fh.Close()
		b.SetBytes(int64(len(nb)))
		for b.Loop() {
			if err := h.CheckNeighbors(fh); err != nil {
				b.Fatal(err)
			}
		}
	})
}
