package hnswsearch

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// BenchmarkLoadFull times mode full's load of a large index (the file read
// into memory from a warm page cache, parsed, New) without and with the
// checks Options.FullMode adds: every neighbor list ("checked"), and for an
// OpenSearch file also the footer CRC (the "footer" arms load a copy with a
// Lucene footer appended). The arms take turns, in a rotating order, once
// per iteration, so a busy neighbour slows all of them alike; it reports
// each arm's median load time and the median of the per-turn ratios to the
// plain load of the same file. Generate the data with
//
//	/usr/bin/python3 bench/gen_hnsw.py --n 1000000 --d 32 --M 16 --out bench-data/hnsw_1m_d32.faiss
//
// and run: go test -run='^$' -bench=LoadFull -benchtime 20x ./hnswsearch
func BenchmarkLoadFull(b *testing.B) {
	path := os.Getenv("FAISS_SIDECAR_LARGE_INDEX")
	if path == "" {
		path = "../bench-data/hnsw_1m_d32.faiss"
	}
	if _, err := os.Stat(path); err != nil {
		b.Skipf("no large index (%v); see the benchmark's comment", err)
	}
	footer := withFooter(b, path)
	arms := []struct {
		name string
		path string
		full bool
		base int // the arm this one's ratio is to
	}{
		{"plain", path, false, 0}, {"checked", path, true, 0},
		{"plain-footer", footer, false, 2}, {"checked-footer", footer, true, 2},
	}
	load := func(path string, full bool) time.Duration {
		t0 := time.Now()
		pf := probe(b, path)
		s, err := storage.Open(context.Background(), path, storage.Options{Backend: "memory", AlignOffset: AlignOffset(pf)})
		if err != nil {
			b.Fatal(err)
		}
		f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
		if err != nil {
			b.Fatal(err)
		}
		x, err := New(context.Background(), f, s, Options{FullMode: full})
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		x.Close()
		s.Close()
		return d
	}
	times := make([][]float64, len(arms))
	var turns int
	for b.Loop() {
		turn := make([]float64, len(arms))
		for j := range arms {
			a := (j + turns) % len(arms)
			turn[a] = load(arms[a].path, arms[a].full).Seconds()
		}
		for a := range arms {
			times[a] = append(times[a], turn[a])
		}
		turns++
	}
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	for a, arm := range arms {
		b.ReportMetric(median(times[a])*1e3, arm.name+"-ms")
		if arm.base != a {
			r := make([]float64, turns)
			for i := range r {
				r[i] = times[a][i] / times[arm.base][i]
			}
			b.ReportMetric(median(r), arm.name+"/"+arms[arm.base].name)
		}
	}
}

// withFooter writes a copy of the file at path with a Lucene codec footer,
// as OpenSearch's k-NN plugin does.
func withFooter(b *testing.B, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	data = binary.BigEndian.AppendUint32(data, 0xC02893E8)
	data = binary.BigEndian.AppendUint32(data, 0)
	data = binary.BigEndian.AppendUint64(data, uint64(crc32.ChecksumIEEE(data)))
	out := filepath.Join(b.TempDir(), "footer.faiss")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return out
}
