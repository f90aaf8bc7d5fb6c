package hnswsearch

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/longtests"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

const skipStorage = "hnsw_flat_l2_skip_storage"

// openSkipStorage opens FAISS 1.15's graph written without its vectors
// (through backend) with the .fvecs FAISS wrote beside it (through the
// same backend) as its vector file.
func openSkipStorage(t *testing.T, backend string, o Options) *Index {
	t.Helper()
	gs := openBackend(t, filepath.Join(faiss115Dir, skipStorage+".faiss"), backend)
	vs := openBackend(t, filepath.Join(faiss115Dir, skipStorage+".fvecs"), backend)
	f, err := faissfmt.OpenWith(partial.ReaderAt(context.Background(), gs), gs.Size(), faissfmt.OpenOptions{AllowNullStorage: true})
	require.NoError(t, err)
	require.True(t, f.VectorsMissing())
	o.Vectors = &Vectors{Storage: vs, Name: skipStorage + ".fvecs", Offset: 4, Stride: 4 + 4*32, Count: 2000, Dim: 32}
	x, err := New(context.Background(), f, gs, o)
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return x
}

// quickVariant is the one variant each slow backend runs without -tags
// long (the others run on the fast backends): the vector cache on direct
// without a block cache, batched reads through zstd frames.
var quickVariant = map[string]string{"direct-uncached": "vector-cache", "zstd": "batch"}

// TestSkipStorageExternalParity: the graph FAISS 1.15 wrote without its
// vectors, searched over the .fvecs beside it as a separate vector file,
// returns FAISS's ids exactly and its distances within distULPs, on every
// backend (both files through it), with batched reads, with the vectors
// pinned by a memory budget (the .fvecs rows compacted) and with a vector
// cache.
func TestSkipStorageExternalParity(t *testing.T) {
	runs, qf, _ := loadFAISS115(t, skipStorage)
	require.Len(t, runs, 2)
	type variant struct {
		name string
		o    Options
	}
	for _, backend := range backendNames() {
		variants := []variant{{"plain", Options{}}}
		switch backend {
		case "pread", "direct", "direct-uncached", "zstd":
			variants = append(variants,
				variant{"batch", Options{BatchReads: true}},
				variant{"pinned", Options{BatchReads: true, HeldBytes: 64 << 20}},
				variant{"vector-cache", Options{BatchReads: true, hold: holding{cacheBytes: 4*2000 + 300*(128+80)}}})
		}
		for _, v := range variants {
			t.Run(backend+"/"+v.name, func(t *testing.T) {
				if q, ok := quickVariant[backend]; ok && !longtests.On && v.name != q {
					t.Skip("runs with -tags long; without it this backend runs its " + q + " variant only")
				}
				t.Parallel()
				x := openSkipStorage(t, backend, v.o)
				if v.name == "pinned" {
					require.Positive(t, x.PinnedBytes())
				}
				for _, run := range runs {
					for qi := range run.IDs {
						res, _, err := x.Search(qf[qi], Params{K: run.K, EfSearch: run.EfSearch}, nil)
						require.NoError(t, err)
						require.Len(t, res, run.K)
						for j := range res {
							want := float32(run.Dist[qi][j])
							require.Equal(t, run.IDs[qi][j], res[j].ID, "ef %d query %d rank %d", run.EfSearch, qi, j)
							require.LessOrEqual(t, testfixtures.ULPs(res[j].Distance, want), int64(distULPs), "ef %d query %d rank %d: %v vs FAISS %v", run.EfSearch, qi, j, res[j].Distance, want)
						}
					}
				}
				require.NoError(t, x.Warm(context.Background(), 0))
			})
		}
	}
}

// TestSkipStorageExternalNoAllocs: a query over a separate vector file
// viewed in place (mmap) or read through a cache allocates nothing.
func TestSkipStorageExternalNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocations are expected")
	}
	_, qf, _ := loadFAISS115(t, skipStorage)
	for _, backend := range []string{"mmap", "memory", "pread"} {
		x := openSkipStorage(t, backend, Options{})
		dst := make([]Result, 0, 10)
		x.Search(qf[0], Params{K: 10}, dst[:0])
		allocs := testing.AllocsPerRun(50, func() {
			_, _, err := x.Search(qf[0], Params{K: 10, EfSearch: 64}, dst[:0])
			require.NoError(t, err)
		})
		assert.Zero(t, allocs, backend)
	}
}

// TestSkipStorageErrors: without a vector file the graph is refused with
// ErrNoVectors; a vector file of another count or dimension, or too short
// for its rows, is refused naming the file; a file that holds its vectors
// refuses a separate one.
func TestSkipStorageErrors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(faiss115Dir, skipStorage+".faiss"))
	require.NoError(t, err)
	f, err := faissfmt.OpenWith(bytes.NewReader(b), int64(len(b)), faissfmt.OpenOptions{AllowNullStorage: true})
	require.NoError(t, err)
	s := partial.NewMemory("graph", b)
	vec := partial.NewMemory("v.fvecs", make([]byte, 2000*132))
	good := Vectors{Storage: vec, Name: "v.fvecs", Offset: 4, Stride: 132, Count: 2000, Dim: 32}

	_, err = New(context.Background(), f, s, Options{})
	require.ErrorIs(t, err, ErrNoVectors)
	assert.ErrorContains(t, err, "IO_FLAG_SKIP_STORAGE")

	for _, c := range []struct {
		name string
		edit func(v *Vectors)
		msg  string
	}{
		{"count", func(v *Vectors) { v.Count = 1999 }, "v.fvecs holds 1999 vectors, the graph has 2000"},
		{"dim", func(v *Vectors) { v.Dim = 16 }, "v.fvecs holds 16-dimensional vectors, the graph has dimension 32"},
		{"short", func(v *Vectors) { v.Offset = 8 }, "v.fvecs: 2000 vectors end at byte 264004, the file has 264000 bytes"},
		{"stride", func(v *Vectors) { v.Stride = 64 }, "v.fvecs: vectors of 128 bytes every 64 bytes"},
	} {
		v := good
		c.edit(&v)
		_, err := New(context.Background(), f, s, Options{Vectors: &v})
		require.ErrorIs(t, err, ErrBadOption, c.name)
		assert.ErrorContains(t, err, c.msg, c.name)
	}
	x, err := New(context.Background(), f, s, Options{Vectors: &good})
	require.NoError(t, err)
	x.Close()

	// A file holding its vectors refuses a separate vector file.
	cb, err := os.ReadFile(filepath.Join(faiss115Dir, "hnsw_cagra_l2.faiss"))
	require.NoError(t, err)
	cf, err := faissfmt.Open(bytes.NewReader(cb), int64(len(cb)))
	require.NoError(t, err)
	_, err = New(context.Background(), cf, partial.NewMemory("c", cb), Options{Vectors: &good})
	require.ErrorIs(t, err, ErrBadOption)
	assert.ErrorContains(t, err, "this IHc2 file holds them")
}

// TestNullStorageRefusals: graphs whose vectors cannot be given back are
// refused with ErrNoVectors whatever is given: an IHNs graph (its
// quantizer's parameters were in the storage) and a binary graph.
func TestNullStorageRefusals(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(faiss115Dir, skipStorage+".faiss"))
	require.NoError(t, err)
	ihns := append([]byte{}, b...)
	copy(ihns, "IHNs")
	f, err := faissfmt.OpenWith(bytes.NewReader(ihns), int64(len(ihns)), faissfmt.OpenOptions{AllowNullStorage: true})
	if err == nil { // faissfmt may refuse the shape itself; if not, New does
		_, err = New(context.Background(), f, partial.NewMemory("g", ihns), Options{Vectors: &Vectors{Storage: partial.NewMemory("v", make([]byte, 2000*128)), Name: "v", Stride: 128, Count: 2000, Dim: 32}})
		require.ErrorIs(t, err, ErrNoVectors)
		assert.ErrorContains(t, err, "quantizer's parameters")
	}
	// binary: IBHf over null, built from a binary fixture.
	bb, err := os.ReadFile(filepath.Join(faiss115Dir, "binary_hnsw_cagra.faiss"))
	require.NoError(t, err)
	bf, err := faissfmt.Open(bytes.NewReader(bb), int64(len(bb)))
	require.NoError(t, err)
	null := append(append(append([]byte{}, bb[:bf.Graph.Child.Off]...), "null"...), bb[bf.Graph.Child.End:]...)
	nf, err := faissfmt.OpenWith(bytes.NewReader(null), int64(len(null)), faissfmt.OpenOptions{AllowNullStorage: true})
	require.NoError(t, err)
	require.True(t, nf.VectorsMissing())
	_, err = New(context.Background(), nf, partial.NewMemory("b", null), Options{})
	require.ErrorIs(t, err, ErrNoVectors)
	assert.ErrorContains(t, err, "binary graph")
}

// TestVectorCodeSize: d·4 for a float graph without vectors.
func TestVectorCodeSize(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(faiss115Dir, skipStorage+".faiss"))
	require.NoError(t, err)
	f, err := faissfmt.OpenWith(bytes.NewReader(b), int64(len(b)), faissfmt.OpenOptions{AllowNullStorage: true})
	require.NoError(t, err)
	assert.Equal(t, int64(128), VectorCodeSize(f))
	assert.Equal(t, uint32(32), binary.LittleEndian.Uint32(b[4:])) // the header's d, as FAISS wrote it
}
