package rerank

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/recordcache"
)

const fixtures = "../testdata/fixtures"

// flatVectors reads a FAISS file's flat vectors through its parsed layout.
func flatVectors(t *testing.T, path string) (Layout, [][]float32) {
	t.Helper()
	l, err := OpenLayout(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, l.Count)
	for i := range out {
		out[i] = make([]float32, l.Dim)
		decode(out[i], b[l.Base+int64(i)*l.Stride:])
	}
	return l, out
}

func writeVecFile(t *testing.T, vs [][]float32) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "v.vec")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	err = WriteVec(f, len(vs[0]), int64(len(vs)), func(i int64, dst []float32) error { copy(dst, vs[i]); return nil }, nil)
	if err != nil || f.Close() != nil {
		t.Fatal(err)
	}
	return p
}

// TestStrategiesReadTheVectors: every strategy returns FAISS's stored
// vectors bit for bit, from a .vec file and in place from the FAISS file.
func TestStrategiesReadTheVectors(t *testing.T) {
	src := filepath.Join(fixtures, "hnsw_flat_large.faiss") // 3000 × 64, IHNf over IxF2
	l, want := flatVectors(t, src)
	if l.Kind != "faiss" || l.Dim != 64 || l.Count != 3000 {
		t.Fatalf("layout %+v", l)
	}
	vec := writeVecFile(t, want)
	labels := []int32{2999, 0, 17, 18, 19, 1500, 0, 2998}
	for _, path := range []string{vec, src} {
		for _, strat := range Strategies {
			s, err := Open(path, strat)
			if err != nil {
				t.Fatal(err)
			}
			if path == vec && (!s.Aligned() || s.Stride != 4096) {
				t.Fatalf(".vec layout %+v", s.Layout)
			}
			got := make([]float32, len(labels)*64)
			var st FetchStats
			if err := s.Fetch(labels, got, &st); err != nil {
				t.Fatalf("%s %s: %v", path, strat, err)
			}
			for i, lb := range labels {
				for j := range 64 {
					if math.Float32bits(got[i*64+j]) != math.Float32bits(want[lb][j]) {
						t.Fatalf("%s %s: label %d component %d = %v, FAISS stored %v", filepath.Base(path), strat, lb, j, got[i*64+j], want[lb][j])
					}
				}
			}
			if strat == "direct" && path == vec {
				a := s.direct.Alignment() // 512 here (statx), 4096 on 4K-sector devices
				if unit := (256 + a - 1) / a * a; st.BytesRead != int64(st.Reads)*unit {
					t.Errorf("aligned .vec: %d bytes in %d reads, want one %d-byte aligned read per vector", st.BytesRead, st.Reads, unit)
				}
			}
			s.Close()
		}
	}
}

// TestRescoreMatchesFAISSBruteForce: rescoring the allowed ids of a filtered
// FAISS run returns FAISS's exact brute-force answer (IndexFlat search with
// an IDSelector, recorded by gen_fixtures.py).
func TestRescoreMatchesFAISSBruteForce(t *testing.T) {
	var fr struct {
		Queries [][]float64 `json:"queries"`
		Runs    []struct {
			K        int     `json:"k"`
			AllowIDs []int64 `json:"allow_ids"`
			Exact    *struct {
				IDs  [][]int64   `json:"ids"`
				Dist [][]float64 `json:"distances"`
			} `json:"exact"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.search.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fr); err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(fixtures, "hnsw_flat_l2.faiss"), "pread")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checked := 0
	for _, run := range fr.Runs {
		if run.Exact == nil {
			continue
		}
		labels := make([]int32, len(run.AllowIDs))
		for i, id := range run.AllowIDs {
			labels[i] = int32(id) // no id map: labels are the ids
		}
		for qi, qv := range fr.Queries {
			q := make([]float32, len(qv))
			for j := range qv {
				q[j] = float32(qv[j])
			}
			hits, err := s.Rescore(q, labels, run.K, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			for r, h := range hits {
				want := run.Exact.Dist[qi][r]
				if math.Abs(float64(h.Distance)-want) > 1e-4*math.Max(1, want) {
					t.Fatalf("query %d rank %d: distance %v, FAISS %v", qi, r, h.Distance, want)
				}
				if int64(h.Label) != run.Exact.IDs[qi][r] && float32(want) != float32(run.Exact.Dist[qi][min(r+1, len(hits)-1)]) && (r == 0 || float32(want) != float32(run.Exact.Dist[qi][r-1])) {
					t.Fatalf("query %d rank %d: label %d, FAISS %d (no tie)", qi, r, h.Label, run.Exact.IDs[qi][r])
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no filtered runs with FAISS brute force in the fixture")
	}
}

func TestShortlistRule(t *testing.T) {
	for _, c := range []struct {
		k    int
		os   float64
		want int
	}{{10, 3, 100}, {10, 20, 200}, {100, 2.5, 250}, {5000, 3, 10000}, {1, 1, 100}} {
		if got := ShortlistSize(c.k, c.os); got != c.want {
			t.Errorf("ShortlistSize(%d, %v) = %d, want %d", c.k, c.os, got, c.want)
		}
	}
	if DefaultOversample(128) != 3 || DefaultOversample(768) != 2 || DefaultOversample(1000) != 1 {
		t.Error("DefaultOversample by dimension")
	}
}

// TestBadVectorFiles: mismatches and corruption are clear errors naming the
// file and the problem.
func TestBadVectorFiles(t *testing.T) {
	_, vs := flatVectors(t, filepath.Join(fixtures, "hnsw_flat_l2.faiss")) // 500 × 32
	good := writeVecFile(t, vs)
	b, _ := os.ReadFile(good)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		return p
	}
	badSum := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(badSum[24:], 499) // count changed, checksum not
	cases := []struct {
		path string
		msg  string
	}{
		{write("trunc.vec", b[:len(b)-4096]), "truncated: 500 records of 4096 bytes need 2048000 bytes after the header, the file has 2043904"},
		{write("sum.vec", badSum), "header checksum"},
		{write("short.vec", b[:100]), "shorter than the 4096-byte header"},
		{write("bad.fvecs", []byte{4, 0, 0, 0, 1, 2, 3}), "record 0 says d=4, more values than the file's 7 bytes hold"},
		{filepath.Join(fixtures, "hnsw_sq_8bit.faiss"), "IxSQ storage holds no full-precision float vectors"},
	}
	for _, c := range cases {
		_, err := Open(c.path, "pread")
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), filepath.Base(c.path)) {
			t.Errorf("%s: err = %v, want %q naming the file", c.path, err, c.msg)
		}
		assert.ErrorIs(t, err, ErrVectors, c.path)
		assert.True(t, strings.HasPrefix(err.Error(), c.path+": "), "%s: %v: the file first, no package prefix", c.path, err)
	}
	s, err := Open(good, "direct")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(32, 500); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(31, 500); !errors.Is(err, ErrVectors) || !strings.Contains(err.Error(), "holds 32-dimensional vectors, the index has dimension 31") {
		t.Errorf("dimension mismatch: %v", err)
	}
	if err := s.Check(32, 501); err == nil || !strings.Contains(err.Error(), "holds 500 vectors, the index has 501") {
		t.Errorf("count mismatch: %v", err)
	}
	if err := s.Fetch([]int32{500}, make([]float32, 32), nil); err == nil || !strings.Contains(err.Error(), "label 500 is out of range [0, 500)") {
		t.Errorf("label out of range: %v", err)
	}
}

// TestFetchAfterClose: a closed store reports it, on every strategy, rather
// than scoring buffers nothing was read into.
func TestFetchAfterClose(t *testing.T) {
	_, vs := flatVectors(t, filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	path := writeVecFile(t, vs)
	for _, strategy := range Strategies {
		s, err := Open(path, strategy)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		_, err = s.Rescore(vs[0], []int32{0, 7, 300}, 2, false, nil)
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("%s: Rescore after Close: err = %v, want one saying the file is closed", strategy, err)
		}
	}
}

// TestOpenParallel: the direct strategy's reads in flight are fixed at
// open: DefaultParallel, or the number given.
func TestOpenParallel(t *testing.T) {
	_, vs := flatVectors(t, filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	path := writeVecFile(t, vs)
	s, err := Open(path, "direct")
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, DefaultParallel, s.direct.Parallel())
	s7, err := OpenParallel(path, "direct", 7)
	require.NoError(t, err)
	defer s7.Close()
	require.Equal(t, 7, s7.direct.Parallel())
	got := make([]float32, 32)
	require.NoError(t, s7.Fetch([]int32{3}, got, nil))
	require.Equal(t, vs[3], got)
}

// TestLongShortlistInParts: a shortlist longer than viewChunk is read in
// parts of at most viewChunk vectors (a bounded read buffer), every vector
// still FAISS's, in the shortlist's order, with and without a cache.
func TestLongShortlistInParts(t *testing.T) {
	src := filepath.Join(fixtures, "hnsw_flat_large.faiss") // 3000 × 64
	_, want := flatVectors(t, src)
	labels := make([]int32, 2*viewChunk+300)
	for i := range labels {
		labels[i] = int32((i * 7919) % 3000)
	}
	for _, strat := range Strategies {
		for _, cached := range []bool{false, true} {
			s, err := Open(src, strat)
			require.NoError(t, err)
			if cached {
				c, err := recordcache.New(3000, 4*64, 100<<10)
				require.NoError(t, err)
				s.SetCache(c)
			}
			got := make([]float32, len(labels)*64)
			var st FetchStats
			require.NoError(t, s.Fetch(labels, got, &st), strat)
			for i, lb := range labels {
				for j := range 64 {
					require.Equal(t, math.Float32bits(want[lb][j]), math.Float32bits(got[i*64+j]), "%s cached=%v: label %d component %d", strat, cached, lb, j)
				}
			}
			assert.Equal(t, len(labels), st.Vectors)
			if strat == "direct" && !cached {
				assert.Equal(t, 3, st.Batches, "three parts, a batch each")
			}
			s.Close()
		}
	}
}
