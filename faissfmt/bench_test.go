package faissfmt

import (
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
