package engine_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

const faiss115Dir = "../testdata/faiss115"

var (
	skipGraph = filepath.Join(faiss115Dir, "hnsw_flat_l2_skip_storage.faiss")
	skipFvecs = filepath.Join(faiss115Dir, "hnsw_flat_l2_skip_storage.fvecs")
)

// skipRuns is FAISS 1.15's k-NN runs on the skip-storage graph (its
// results computed with the vectors in memory) and the queries.
func skipRuns(t *testing.T) (runs []testfixtures.KNN115, queries [][]float64, base *vecio.Matrix) {
	t.Helper()
	f, err := testfixtures.Load115(faiss115Dir, "hnsw_flat_l2_skip_storage")
	require.NoError(t, err)
	require.Len(t, f.KNN, 2)
	for _, q := range f.QF {
		queries = append(queries, testfixtures.Float64s(q))
	}
	base, err = vecio.ReadFile(skipFvecs)
	require.NoError(t, err)
	return f.KNN, queries, base
}

// vectorFiles writes the skip-storage graph's vectors in every accepted
// format besides the .fvecs FAISS wrote: .vec, float32 .npy, and a FAISS
// flat file (IxF2).
func vectorFiles(t *testing.T, base *vecio.Matrix) map[string]string {
	dir := t.TempDir()
	out := map[string]string{"fvecs": skipFvecs}

	vec := filepath.Join(dir, "v.vec")
	f, err := os.Create(vec)
	require.NoError(t, err)
	require.NoError(t, rerank.WriteVec(f, base.Dim, int64(base.N), func(i int64, dst []float32) error {
		copy(dst, base.RowF32(int(i)))
		return nil
	}, nil))
	require.NoError(t, f.Close())
	out["vec"] = vec

	var data []byte
	for _, v := range base.F32 {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", base.N, base.Dim)
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	npy := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
	npy = append(append(npy, hdr...), data...)
	out["npy"] = filepath.Join(dir, "v.npy")
	require.NoError(t, os.WriteFile(out["npy"], npy, 0o644))

	// IxF2: fourcc, d, ntotal, two unused i64, is_trained, metric, then
	// the vec<f32>.
	fl := []byte("IxF2")
	fl = binary.LittleEndian.AppendUint32(fl, uint32(base.Dim))
	fl = binary.LittleEndian.AppendUint64(fl, uint64(base.N))
	fl = binary.LittleEndian.AppendUint64(fl, 1<<20)
	fl = binary.LittleEndian.AppendUint64(fl, 1<<20)
	fl = append(fl, 1)
	fl = binary.LittleEndian.AppendUint32(fl, 1)
	fl = binary.LittleEndian.AppendUint64(fl, uint64(len(base.F32)))
	fl = append(fl, data...)
	out["faiss"] = filepath.Join(dir, "v.faiss")
	require.NoError(t, os.WriteFile(out["faiss"], fl, 0o644))
	return out
}

// TestSeparateVectorsParity: the graph FAISS 1.15 wrote without its
// vectors, given them as a separate file in every accepted format, returns
// FAISS's ids exactly and its distances within 8 ulps (FAISS 1.15 is an
// AVX2 build) in mode full, on every memory_efficient backend, under a
// memory budget; on_disk (4x to 32x: estimated walk, exact rerank) agrees
// with FAISS's top 10 at ≥ 0.9 with FAISS's distances for the ids found.
func TestSeparateVectorsParity(t *testing.T) {
	runs, queries, base := skipRuns(t)
	files := vectorFiles(t, base)
	type mode struct {
		mode    engine.Mode
		backend engine.Backend
	}
	modes := []mode{{"full", ""}, {"memory_efficient", "mmap"}, {"memory_efficient", "pread"}, {"memory_efficient", "direct"}}
	for kind, path := range files {
		for _, m := range modes {
			if kind != "fvecs" && m.mode != "full" && m.backend != "pread" {
				continue // the formats differ in layout only: one mode each suffices beyond fvecs
			}
			t.Run(kind+"/"+string(m.mode)+"/"+string(m.backend), func(t *testing.T) {
				x, plan, err := engine.Open(engine.Spec{Path: skipGraph, Mode: m.mode, Backend: m.backend, VectorsPath: path})
				require.NoError(t, err)
				defer x.Close()
				if m.mode == "full" {
					fi, err := os.Stat(path)
					require.NoError(t, err)
					assert.GreaterOrEqual(t, plan.NeedBytes(), fi.Size(), "mode full holds the vector file too")
				}
				checkRuns(t, x, runs, queries, 1.0)
				require.NoError(t, x.Warm())
				require.NoError(t, x.CheckFile())
			})
		}
	}
	t.Run("memory budget", func(t *testing.T) {
		pf, err := engine.Probe(skipGraph, "direct")
		require.NoError(t, err)
		p, err := hnswsearch.PlanBudget(pf, true, 1<<40, 4)
		require.NoError(t, err)
		for _, held := range []int64{16 << 10, 8 << 20} { // a vector cache; everything pinned
			x, _, err := engine.Open(engine.Spec{Path: skipGraph, MemoryBudget: p.HeapBytes + held, Workers: 4, VectorsPath: skipFvecs})
			require.NoError(t, err)
			assert.Equal(t, engine.BackendDirect, x.Backend())
			checkRuns(t, x, runs, queries, 1.0)
			require.NoError(t, x.Warm())
			x.Close()
		}
	})
	t.Run("on_disk", func(t *testing.T) {
		for _, c := range []string{"4x", "5x", "6x", "8x", "32x"} {
			x, plan, err := engine.Open(engine.Spec{Path: skipGraph, Mode: engine.ModeOnDisk, Compression: c, VectorsPath: skipFvecs,
				GuideDir: t.TempDir()})
			require.NoError(t, err)
			assert.Equal(t, skipFvecs, plan.Spec().Rerank.Path, "reranks from the vector file")
			_, ok := x.Guide()
			require.True(t, ok)
			checkRuns(t, x, runs, queries, 0.9)
			x.Close()
		}
	})
}

// checkRuns runs FAISS's runs on x: ids and distances must match when
// minRecall is 1, else recall@k against FAISS's ids must reach minRecall
// (with exact distances for the ids found).
func checkRuns(t *testing.T, x *engine.Index, runs []testfixtures.KNN115, queries [][]float64, minRecall float64) {
	t.Helper()
	var sc engine.Scratch
	for _, run := range runs {
		qp, err := x.Plan(engine.Request{K: run.K, EfSearch: run.EfSearch, EfSearchSet: true})
		require.NoError(t, err)
		found, all := 0, 0
		for qi, q := range queries {
			hits, _, err := x.Query(&qp, q, &sc)
			require.NoError(t, err)
			want := map[int64]float64{}
			for j, id := range run.IDs[qi] {
				want[id] = run.Dist[qi][j]
			}
			if minRecall == 1 {
				require.Len(t, hits, run.K)
			}
			for j, h := range hits {
				all++
				wd, ok := want[h.ID]
				if minRecall == 1 {
					require.Equal(t, run.IDs[qi][j], h.ID, "ef %d query %d rank %d", run.EfSearch, qi, j)
				}
				if ok {
					found++
					require.LessOrEqual(t, testfixtures.ULPs(float32(h.Distance), float32(wd)), int64(8), "ef %d query %d id %d: %v vs FAISS %v", run.EfSearch, qi, h.ID, h.Distance, wd)
				}
			}
		}
		t.Logf("ef %d: %.3f of FAISS's ids", run.EfSearch, float64(found)/float64(all))
		assert.GreaterOrEqual(t, float64(found)/float64(all), minRecall, "ef %d", run.EfSearch)
	}
}

// TestSeparateVectorsErrors: a graph without vectors and no vector file,
// a vector file of another count or dimension, a missing one, and a
// vector file for a file that holds its vectors are refused, naming the
// file.
func TestSeparateVectorsErrors(t *testing.T) {
	_, _, base := skipRuns(t)
	dir := t.TempDir()
	write := func(name string, rows int, dim int) string {
		var buf bytes.Buffer
		m := make([][]float32, rows)
		for i := range m {
			m[i] = make([]float32, dim)
			copy(m[i], base.RowF32(i))
		}
		require.NoError(t, vecio.WriteFvecs(&buf, m))
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
		return p
	}

	_, _, err := engine.Open(engine.Spec{Path: skipGraph})
	require.Error(t, err)
	assert.ErrorIs(t, err, hnswsearch.ErrNoVectors)
	assert.ErrorIs(t, err, engine.ErrBadSpec)
	var fe *engine.FieldError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, "vectors_path", fe.Field)
	assert.Equal(t, skipGraph+": the vectors were left out of this file (IO_FLAG_SKIP_STORAGE); give them with --vectors",
		fe.Message(func(string) string { return "--vectors" }))

	short := write("short.fvecs", 1999, 32)
	_, _, err = engine.Open(engine.Spec{Path: skipGraph, VectorsPath: short})
	require.ErrorIs(t, err, engine.ErrBadSpec)
	assert.EqualError(t, err, short+" holds 1999 vectors, the graph "+skipGraph+" has 2000")

	narrow := write("narrow.fvecs", 2000, 16)
	_, _, err = engine.Open(engine.Spec{Path: skipGraph, VectorsPath: narrow, VectorsLabel: "narrow.fvecs"})
	require.ErrorIs(t, err, engine.ErrBadSpec)
	assert.EqualError(t, err, "narrow.fvecs holds 16-dimensional vectors, the graph "+skipGraph+" has dimension 32")

	missing := filepath.Join(dir, "missing.fvecs")
	_, _, err = engine.Open(engine.Spec{Path: skipGraph, VectorsPath: missing})
	require.Error(t, err)
	assert.ErrorContains(t, err, missing)

	_, _, err = engine.Open(engine.Spec{Path: filepath.Join(faiss115Dir, "hnsw_cagra_l2.faiss"), VectorsPath: skipFvecs})
	require.ErrorIs(t, err, engine.ErrBadSpec)
	assert.ErrorIs(t, err, partial.ErrBadOption)
	assert.ErrorContains(t, err, "is for a graph written without its vectors")
}

// TestSeparateVectorsRecords: a vector file whose records disagree with
// its first (record 5 and the last; the last alone), is truncated, or an
// .npy file that is not exactly a C-order float32 array is refused at
// load in every mode, naming the file as given and the record, never
// served.
func TestSeparateVectorsRecords(t *testing.T) {
	good, err := os.ReadFile(skipFvecs)
	require.NoError(t, err)
	const rec = 4 + 32*4
	require.Zero(t, len(good)%rec)
	n := len(good) / rec
	dir := t.TempDir()
	corrupt := func(name string, dims map[int]uint32, cut int) string {
		b := bytes.Clone(good[:len(good)-cut])
		for i, d := range dims {
			binary.LittleEndian.PutUint32(b[i*rec:], d)
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': True, 'shape': (%d, 32), }\n", n)
	fortran := filepath.Join(dir, "fortran.npy")
	require.NoError(t, os.WriteFile(fortran, append(binary.LittleEndian.AppendUint16([]byte("\x93NUMPY\x01\x00"), uint16(len(hdr))),
		append([]byte(hdr), make([]byte, n*32*4)...)...), 0o644))
	text := filepath.Join(dir, "text.npy")
	require.NoError(t, os.WriteFile(text, []byte("# not vectors, not an array\n"), 0o644))
	for _, c := range []struct {
		path, label, msg string
	}{
		{text, "text.npy", "text.npy: neither a .vec, an .fvecs, an .npy nor a FAISS file with flat vectors: not a FAISS index file: its first 4 bytes are no FAISS index type this program knows"},
		{corrupt("attack.fvecs", map[int]uint32{5: 31, n - 1: 33}, 0), "attack.fvecs", "attack.fvecs: record 5 says d=31, the first says d=32"},
		{corrupt("last.fvecs", map[int]uint32{n - 1: 33}, 0), "data/last.fvecs", "data/last.fvecs: record 1999 says d=33, the first says d=32"},
		{corrupt("cut.fvecs", nil, 7), "cut.fvecs", "cut.fvecs: record 1999 is cut short: 125 of its 132 bytes (truncated?)"},
		{fortran, "fortran.npy", "fortran.npy: Fortran-order (column-major) arrays are not supported; save a C-order array (np.ascontiguousarray)"},
	} {
		for _, spec := range []engine.Spec{
			{Mode: "full"}, {Mode: "memory_efficient", Backend: "mmap"}, {Mode: "memory_efficient", Backend: "pread"},
			{Mode: "memory_efficient", Backend: "direct"}, {Mode: engine.ModeOnDisk, Compression: "4x", GuideDir: t.TempDir()},
		} {
			spec.Path, spec.VectorsPath, spec.VectorsLabel = skipGraph, c.path, c.label
			x, _, err := engine.Open(spec)
			if x != nil {
				x.Close()
			}
			require.Error(t, err, "%s %s %s", c.label, spec.Mode, spec.Backend)
			assert.ErrorIs(t, err, rerank.ErrVectors, "%s %s %s", c.label, spec.Mode, spec.Backend)
			assert.EqualError(t, err, c.msg, "%s %s %s", c.label, spec.Mode, spec.Backend)
		}
	}
}

// TestRerankVectorsRecords: a rerank vector file whose records disagree
// is refused at load, named as given (RerankSpec.Label) with the record;
// one of another count is named as given too.
func TestRerankVectorsRecords(t *testing.T) {
	idx := fixture("hnsw_flat_l2.faiss")
	l, err := rerank.OpenLayout(idx)
	require.NoError(t, err)
	rec := 4 + 4*l.Dim
	var b []byte
	for i := range int(l.Count) {
		d := uint32(l.Dim)
		if i == 5 {
			d = uint32(l.Dim - 1)
		}
		b = binary.LittleEndian.AppendUint32(b, d)
		b = append(b, make([]byte, rec-4)...)
	}
	bad := filepath.Join(t.TempDir(), "r.fvecs")
	require.NoError(t, os.WriteFile(bad, b, 0o644))
	short := filepath.Join(t.TempDir(), "short.fvecs")
	require.NoError(t, os.WriteFile(short, b[:5*rec], 0o644))
	for _, spec := range []engine.Spec{{Mode: "full"}, {Mode: "memory_efficient"}, {Mode: engine.ModeOnDisk, Compression: "4x", GuideDir: t.TempDir()}} {
		spec.Path = idx
		spec.Rerank = &engine.RerankSpec{Path: bad, Label: "given/r.fvecs"}
		x, _, err := engine.Open(spec)
		if x != nil {
			x.Close()
		}
		require.ErrorIs(t, err, rerank.ErrVectors, spec.Mode)
		assert.EqualError(t, err, fmt.Sprintf("given/r.fvecs: record 5 says d=%d, the first says d=%d", l.Dim-1, l.Dim), spec.Mode)
		spec.Rerank = &engine.RerankSpec{Path: short, Label: "given/short.fvecs"}
		x, _, err = engine.Open(spec)
		if x != nil {
			x.Close()
		}
		require.ErrorIs(t, err, rerank.ErrVectors, spec.Mode)
		assert.EqualError(t, err, fmt.Sprintf("given/short.fvecs holds 5 vectors, the index has %d", l.Count), spec.Mode)
	}
}

// TestSeparateVectorsChangedAfterPrepare: a vector file written over or
// replaced between Prepare (which checked every record) and Open is not
// served unchecked: Open fails with ErrFileChanged naming it.
func TestSeparateVectorsChangedAfterPrepare(t *testing.T) {
	good, err := os.ReadFile(skipFvecs)
	require.NoError(t, err)
	bad := bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[5*132:], 31)
	for _, how := range []string{"written", "renamed"} {
		for _, mode := range []engine.Mode{"full", "memory_efficient"} {
			dir := t.TempDir()
			p := filepath.Join(dir, "v.fvecs")
			require.NoError(t, os.WriteFile(p, good, 0o644))
			plan, err := engine.Prepare(engine.Spec{Path: skipGraph, Mode: mode, VectorsPath: p, VectorsLabel: "v.fvecs"})
			require.NoError(t, err, "%s %s", how, mode)
			if how == "written" {
				require.NoError(t, os.WriteFile(p, bad, 0o644))
				// A later modification time, whatever the clock's granularity.
				require.NoError(t, os.Chtimes(p, time.Now().Add(time.Hour), time.Now().Add(time.Hour)))
			} else {
				tmp := filepath.Join(dir, "new.fvecs")
				require.NoError(t, os.WriteFile(tmp, bad, 0o644))
				require.NoError(t, os.Rename(tmp, p))
			}
			x, err := plan.Open()
			if x != nil {
				x.Close()
			}
			require.ErrorIs(t, err, partial.ErrFileChanged, "%s %s", how, mode)
			assert.EqualError(t, err, skipGraph+": v.fvecs changed after it was checked; load it again", "%s %s", how, mode)
		}
	}
	plan, err := engine.Prepare(engine.Spec{Path: skipGraph, VectorsPath: skipFvecs})
	require.NoError(t, err)
	x, err := plan.Open()
	require.NoError(t, err, "an unchanged file opens")
	x.Close()
}
