package hnswsearch

import (
	"bytes"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// baseLevelOnlyFile writes a copy of the CAGRA fixture name with
// base_level_only set (the byte after keep_max_size_level0, right after
// the HNSW header: 33 bytes for float, 21 for binary) and returns its path
// and the parsed original.
func baseLevelOnlyFile(t *testing.T, name string) (string, *faissfmt.File) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(faiss115Dir, name+".faiss"))
	require.NoError(t, err)
	f, err := faissfmt.Open(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	at := f.Graph.Off + 4 + 33 + 1
	if f.Graph.Binary {
		at = f.Graph.Off + 4 + 21 + 1
	}
	require.Equal(t, byte(0), b[at])
	out := append([]byte{}, b...)
	out[at] = 1
	nf, err := faissfmt.Open(bytes.NewReader(out), int64(len(out)))
	require.NoError(t, err)
	require.True(t, nf.Graph.CAGRA.BaseLevelOnly)
	require.Equal(t, int32(32), nf.Graph.CAGRA.NumBaseLevelSearchEntrypoints)
	path := filepath.Join(t.TempDir(), name+"_base_level_only.faiss")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	return path, f
}

// exactTruth is, per query, the k-th smallest exact distance (float64:
// squared L2, −inner product, or Hamming) and a function giving the exact
// distance of query qi to vector v.
func exactTruth(t *testing.T, f *faissfmt.File, raw []byte, qf [][]float32, qb [][]byte, k int) ([]float64, func(qi int, v int64) float64) {
	t.Helper()
	sec, ok := f.Storage.Section("codes")
	require.True(t, ok)
	cs := f.Storage.CodeSize
	codes := raw[sec.Offset : sec.Offset+sec.Len]
	n := f.Graph.NTotal
	dist := func(qi int, v int64) float64 {
		c := codes[v*cs : (v+1)*cs]
		if qb != nil {
			h := 0
			for j := range c {
				h += bits.OnesCount8(c[j] ^ qb[qi][j])
			}
			return float64(h)
		}
		var s float64
		for j, q := range qf[qi] {
			x := float64(math.Float32frombits(uint32(c[4*j]) | uint32(c[4*j+1])<<8 | uint32(c[4*j+2])<<16 | uint32(c[4*j+3])<<24))
			if f.Graph.Metric == faissfmt.MetricL2 {
				s += (float64(q) - x) * (float64(q) - x)
			} else {
				s -= float64(q) * x
			}
		}
		return s
	}
	nq := len(qf) + len(qb)
	kth := make([]float64, nq)
	all := make([]float64, n)
	for qi := range nq {
		for v := range n {
			all[v] = dist(qi, v)
		}
		slices.Sort(all)
		kth[qi] = all[k-1]
	}
	return kth, dist
}

// recallOf is the share of results within each query's exact k-th
// distance (ties at the boundary count: binary distances tie often).
func recallOf(ids [][]int64, kth []float64, dist func(int, int64) float64) float64 {
	hit, all := 0, 0
	for qi, row := range ids {
		for _, v := range row {
			all++
			if v >= 0 && dist(qi, v) <= kth[qi]+1e-4*math.Max(1, math.Abs(kth[qi])) {
				hit++
			}
		}
	}
	return float64(hit) / float64(all)
}

// TestCAGRABaseLevelOnlyRecall: each CAGRA fixture with base_level_only
// set is searched from random level-0 entry points; recall@10 against
// exact ground truth at efSearch 16 and 64 is at least that of FAISS
// 1.15's own base_level_only rows (one of its random runs) less a small
// slack, on every backend; the upper levels are skipped (every distance
// but the draws is on level 0); the pool is max(ef, k). FAISS's binary
// batch rows record its bug (README) and are not used: the per-query rows
// are.
func TestCAGRABaseLevelOnlyRecall(t *testing.T) {
	const slack = 0.03
	for fi, name := range cagraFixtures {
		t.Run(name, func(t *testing.T) {
			path, f := baseLevelOnlyFile(t, name)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			runs, qf, qb := loadFAISS115(t, name)
			kth, dist := exactTruth(t, f, raw, qf, qb, 10)
			faissRecall := map[int]float64{}
			for _, run := range runs {
				if run.BaseLevelOnly == nil || !*run.BaseLevelOnly || (qb != nil && run.Call == "batch") {
					continue
				}
				faissRecall[run.EfSearch] = recallOf(run.IDs, kth, dist)
			}
			require.Len(t, faissRecall, 2, "FAISS's base_level_only rows at ef 16 and 64")
			forEachBackend(t, path, fi, len(cagraFixtures), func(t *testing.T, backend string, s partial.Storage, batch bool) {
				x := openIndex(t, s, Options{BatchReads: batch})
				for ef, want := range faissRecall {
					ids := make([][]int64, len(kth))
					for qi := range ids {
						res, st, err := searchOne(x, qf0(qf, qi), qb0(qb, qi), Params{K: 10, EfSearch: ef})
						require.NoError(t, err)
						for _, r := range res {
							ids[qi] = append(ids[qi], r.ID)
						}
						require.Equal(t, 32+st.NDisLevel0, st.NDis, "%s ef %d query %d: only the 32 draws are off level 0", backend, ef, qi)
						require.Equal(t, max(ef, 10), st.PoolCapacity)
					}
					got := recallOf(ids, kth, dist)
					t.Logf("%s %s ef %d: recall@10 %.3f, FAISS 1.15 %.3f", name, backend, ef, got, want)
					assert.GreaterOrEqual(t, got, want-slack, "%s ef %d", backend, ef)
				}
			})
		})
	}
}

func qf0(qf [][]float32, i int) []float32 {
	if qf == nil {
		return nil
	}
	return qf[i]
}

func qb0(qb [][]byte, i int) []byte {
	if qb == nil {
		return nil
	}
	return qb[i]
}

// TestCAGRABaseLevelOnlySeed: the same seed gives the same results and
// work for every query, whatever ran before (another index, the queries in
// reverse order, concurrently); another seed draws other entry points.
func TestCAGRABaseLevelOnlySeed(t *testing.T) {
	path, _ := baseLevelOnlyFile(t, "hnsw_cagra_l2")
	_, qf, _ := loadFAISS115(t, "hnsw_cagra_l2")
	s := openBackend(t, path, "memory")
	type out struct {
		res  []Result
		ndis int
	}
	runAll := func(x *Index, reverse bool) []out {
		o := make([]out, len(qf))
		for i := range qf {
			qi := i
			if reverse {
				qi = len(qf) - 1 - i
			}
			res, st, err := x.Search(qf[qi], Params{K: 10, EfSearch: 16}, nil)
			require.NoError(t, err)
			o[qi] = out{res, st.NDis}
		}
		return o
	}
	a := runAll(openIndex(t, s, Options{}), false)
	b := runAll(openIndex(t, s, Options{}), true)
	assert.Equal(t, a, b, "default seed: reproducible")
	br := openIndex(t, s, Options{})
	batch := br.SearchBatch(func() []Query {
		qs := make([]Query, len(qf))
		for i := range qf {
			qs[i] = Query{Vector: qf[i]}
		}
		return qs
	}(), Params{K: 10, EfSearch: 16}, 4, nil)
	for i, r := range batch {
		require.NoError(t, r.Err)
		assert.Equal(t, a[i].res, r.Hits, "query %d concurrently", i)
	}
	c := runAll(openIndex(t, s, Options{CAGRASeed: 42}), false)
	c2 := runAll(openIndex(t, s, Options{CAGRASeed: 42}), true)
	assert.Equal(t, c, c2, "seed 42: reproducible")
	differ := 0
	for i := range a {
		if a[i].ndis != c[i].ndis {
			differ++
		}
	}
	assert.Greater(t, differ, len(a)/2, "another seed starts most queries elsewhere")
}

// TestUniform: the draw covers [0, n) evenly (chi-square over 20 bins).
func TestUniform(t *testing.T) {
	const n, draws = 2000, 200000
	var bins [20]int
	st := uint64(7)
	for range draws {
		v := uniform(&st, n)
		require.Less(t, v, uint64(n))
		bins[v*20/n]++
	}
	var chi float64
	for _, c := range bins {
		e := float64(draws) / 20
		chi += (float64(c) - e) * (float64(c) - e) / e
	}
	assert.Less(t, chi, 43.8, "chi-square with 19 degrees of freedom at p = 0.001")
	assert.Equal(t, uint64(0), uniform(&st, 1))
}
