package hnswsearch

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// faiss115Dir holds files written by FAISS v1.15.0 with its own results
// (testdata/faiss115/README.md).
const faiss115Dir = "../testdata/faiss115"

// faiss115KNN is one k-NN run FAISS 1.15 recorded in NAME.json.
type faiss115KNN = testfixtures.KNN115

// loadFAISS115 reads NAME.json's k-NN runs and the queries beside it
// (float from queries.fvecs, binary from queries.bvecs; the other is nil).
func loadFAISS115(t *testing.T, name string) (runs []faiss115KNN, qf [][]float32, qb [][]byte) {
	t.Helper()
	f, err := testfixtures.Load115(faiss115Dir, name)
	require.NoError(t, err)
	return f.KNN, f.QF, f.QB
}

// cagraFixtures are the CAGRA-built HNSW files FAISS 1.15 wrote; all three
// store base_level_only = 0, which TestCAGRAFixturesAreHNSW checks.
var cagraFixtures = []string{"hnsw_cagra_l2", "hnsw_cagra_ip", "binary_hnsw_cagra"}

// TestCAGRAFixturesAreHNSW: the fixtures store base_level_only false, so
// FAISS searches them exactly as a plain HNSW, which is what New serves.
func TestCAGRAFixturesAreHNSW(t *testing.T) {
	for _, name := range cagraFixtures {
		b, err := os.ReadFile(filepath.Join(faiss115Dir, name+".faiss"))
		require.NoError(t, err)
		f, err := faissfmt.Open(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		require.NotNil(t, f.Graph.CAGRA, name)
		assert.False(t, f.Graph.CAGRA.BaseLevelOnly, name)
	}
}

// distULPs bounds how far (in float32 units in the last place) a float
// distance may sit from FAISS 1.15's. That build is AVX2 and sums the 32
// terms in an order neither kernel follows (exact is sequential, fast has
// its own lanes): measured, exact is within 4 ulps and fast within 2 on
// every row. Hamming distances are integers and must be equal.
const distULPs = 8

// TestFAISS115CAGRAParity: on every backend and with both kernels, the
// CAGRA-built HNSW files return FAISS 1.15's ids, in its order, and its
// distances (bit-identical for binary, within distULPs for float) for every
// deterministic run (base_level_only false; efSearch 16 and 64). The
// base_level_only runs use random entry points and are not compared; the
// binary ones in batch mode also record a FAISS 1.15 bug (README).
func TestFAISS115CAGRAParity(t *testing.T) {
	for fi, name := range cagraFixtures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runs, qf, qb := loadFAISS115(t, name)
			var det []faiss115KNN
			for _, run := range runs {
				if run.BaseLevelOnly != nil && !*run.BaseLevelOnly && run.Deterministic {
					det = append(det, run)
				}
			}
			require.Len(t, det, 2, "deterministic runs (efSearch 16 and 64)")
			forEachBackend(t, filepath.Join(faiss115Dir, name+".faiss"), fi, len(cagraFixtures), func(t *testing.T, backend string, s partial.Storage, batch bool) {
				for _, kernel := range []Kernel{Fast, Exact} {
					x := openIndex(t, s, Options{Semantics: Modern, Kernel: kernel, BatchReads: batch})
					for _, run := range det {
						p := Params{K: run.K, EfSearch: run.EfSearch}
						for qi := range run.IDs {
							var res []Result
							var err error
							if qb != nil {
								res, _, err = x.SearchBinary(qb[qi], p, nil)
							} else {
								res, _, err = x.Search(qf[qi], p, nil)
							}
							require.NoError(t, err)
							require.Len(t, res, run.K, "%s %s ef %d query %d", backend, kernel, run.EfSearch, qi)
							tol := int64(distULPs)
							if qb != nil {
								tol = 0
							}
							for j := range res {
								want := float32(run.Dist[qi][j])
								if res[j].ID != run.IDs[qi][j] || testfixtures.ULPs(res[j].Distance, want) > tol {
									t.Fatalf("%s %s ef %d query %d rank %d: got (%d, %v), FAISS 1.15 (%d, %v)\n got %v\nwant %v %v",
										backend, kernel, run.EfSearch, qi, j, res[j].ID, res[j].Distance, run.IDs[qi][j], want, res, run.IDs[qi], run.Dist[qi])
								}
							}
						}
					}
				}
			})
		})
	}
}

// TestSkipStorageWithVectorsParity: the graph of the file FAISS 1.15 wrote
// without its vectors (IO_FLAG_SKIP_STORAGE), given back the vectors FAISS
// wrote beside it (.fvecs) as an IxF2 storage in place of "null", returns
// FAISS's results. This is what a separate vector source must reproduce.
func TestSkipStorageWithVectorsParity(t *testing.T) {
	const name = "hnsw_flat_l2_skip_storage"
	b, err := os.ReadFile(filepath.Join(faiss115Dir, name+".faiss"))
	require.NoError(t, err)
	f, err := faissfmt.OpenWith(bytes.NewReader(b), int64(len(b)), faissfmt.OpenOptions{AllowNullStorage: true})
	require.NoError(t, err)
	require.True(t, f.VectorsMissing())
	g := f.Graph
	fv, err := os.ReadFile(filepath.Join(faiss115Dir, name+".fvecs"))
	require.NoError(t, err)
	require.Len(t, fv, int(g.NTotal)*(4+4*g.D))

	// IxF2: fourcc, float header (d, ntotal, two unused i64, is_trained,
	// metric), then vec<f32> of ntotal·d values.
	st := []byte("IxF2")
	st = binary.LittleEndian.AppendUint32(st, uint32(g.D))
	st = binary.LittleEndian.AppendUint64(st, uint64(g.NTotal))
	st = binary.LittleEndian.AppendUint64(st, 1<<20)
	st = binary.LittleEndian.AppendUint64(st, 1<<20)
	st = append(st, 1)
	st = binary.LittleEndian.AppendUint32(st, uint32(g.Metric))
	st = binary.LittleEndian.AppendUint64(st, uint64(g.NTotal)*uint64(g.D))
	for i := 0; i < int(g.NTotal); i++ {
		row := fv[i*(4+4*g.D):]
		require.Equal(t, uint32(g.D), binary.LittleEndian.Uint32(row))
		st = append(st, row[4:4+4*g.D]...)
	}
	whole := append(append([]byte{}, b[:g.Child.Off]...), st...)
	path := filepath.Join(t.TempDir(), "with_vectors.faiss")
	require.NoError(t, os.WriteFile(path, whole, 0o644))

	runs, qf, _ := loadFAISS115(t, name)
	require.Len(t, runs, 2)
	s := openBackend(t, path, "memory")
	x := openIndex(t, s, Options{Semantics: Modern})
	for _, run := range runs {
		require.True(t, run.Deterministic)
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
}
