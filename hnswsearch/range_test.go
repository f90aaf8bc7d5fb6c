package hnswsearch

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// faiss115Range is one range-search run FAISS 1.15 recorded in NAME.json.
type faiss115Range = testfixtures.Range115

// rangeFixtures are FAISS 1.15's range-search files.
var rangeFixtures = []string{"range_hnsw_flat_l2", "range_hnsw_flat_ip", "range_idmap_hnsw_flat_l2"}

// loadRange115 reads NAME.json's range runs, its filter's ids and the
// float queries.
func loadRange115(t *testing.T, name string) ([]faiss115Range, []int64, [][]float32) {
	t.Helper()
	f, err := testfixtures.Load115(faiss115Dir, name)
	require.NoError(t, err)
	require.Len(t, f.Range, 12, "3 radii × ef 16/64 × unfiltered/filtered")
	require.Len(t, f.Filter.IDs, 600)
	return f.Range, f.Filter.IDs, f.QF
}

// TestFAISS115RangeParity: on every backend and with both kernels, range
// search returns FAISS 1.15's results for each of its 12 runs per fixture
// (L2, IP, IndexIDMap; 3 radii × ef 16/64 × with/without a 30% filter):
// the same ids in the same (first-evaluated) order, distances within
// distULPs. The IndexIDMap's filtered runs take the stored efSearch (40),
// as FAISS does, which effective_efSearch records.
func TestFAISS115RangeParity(t *testing.T) {
	for fi, name := range rangeFixtures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runs, allow, qf := loadRange115(t, name)
			quirk := 0
			for _, run := range runs {
				if run.Effective != run.EfSearch {
					quirk++
				}
			}
			if name == "range_idmap_hnsw_flat_l2" {
				require.Equal(t, 6, quirk, "the 6 filtered IDMap runs (ef 16 and 64) record efSearch 40")
			}
			forEachBackend(t, filepath.Join(faiss115Dir, name+".faiss"), fi, len(rangeFixtures), func(t *testing.T, backend string, s partial.Storage, batch bool) {
				kernels := []Kernel{Fast, Exact}
				if strings.HasPrefix(backend, "direct-uncached") {
					kernels = kernels[:1] // every vector is a device read: one kernel is slow enough
				}
				step := queryStep(backend)
				for _, kernel := range kernels {
					o := parityOptions(t, backend, s, batch)
					o.Semantics, o.Kernel = Modern, kernel
					x := openIndex(t, s, o)
					total := 0
					for ri, run := range runs {
						p := RangeParams{Radius: float32(run.Radius), EfSearch: run.EfSearch}
						if run.Filtered {
							p.Filter = allow
						}
						require.Len(t, run.Lims, len(qf)+1)
						for qi := 0; qi < len(qf); qi += step {
							res, st, err := x.RangeSearch(qf[qi], p, nil)
							require.NoError(t, err)
							require.False(t, st.Truncated)
							lo, hi := run.Lims[qi], run.Lims[qi+1]
							ids, dis := run.IDs[lo:hi], run.Dist[lo:hi]
							got := make([]int64, len(res))
							for j, r := range res {
								got[j] = r.ID
							}
							require.Equal(t, ids, got, "%s %s run %d (r=%v ef=%d filtered=%v) query %d", backend, kernel, ri, run.Radius, run.EfSearch, run.Filtered, qi)
							for j, r := range res {
								want := float32(dis[j])
								if testfixtures.ULPs(r.Distance, want) > distULPs {
									t.Fatalf("%s %s run %d query %d rank %d: distance %v, FAISS 1.15 %v", backend, kernel, ri, qi, j, r.Distance, want)
								}
							}
							total += len(res)
						}
					}
					require.Greater(t, total, 1000/step, "the runs return results")
				}
			})
		})
	}
}

// TestRangeMaxResults: a cap returns the first MaxResults of FAISS's
// order, says Truncated, and only when more qualified.
func TestRangeMaxResults(t *testing.T) {
	const name = "range_hnsw_flat_l2"
	runs, _, qf := loadRange115(t, name)
	run := runs[4] // the largest radius, ef 16, unfiltered
	require.False(t, run.Filtered)
	require.Equal(t, 16, run.EfSearch)
	x := openIndex(t, openBackend(t, filepath.Join(faiss115Dir, name+".faiss"), "memory"), Options{})
	cut := 0
	for qi, q := range qf {
		want := run.IDs[run.Lims[qi]:run.Lims[qi+1]]
		for _, m := range []int{1, len(want) - 1, len(want), len(want) + 1} {
			if m < 1 {
				continue
			}
			res, st, err := x.RangeSearch(q, RangeParams{Radius: float32(run.Radius), EfSearch: 16, MaxResults: m}, nil)
			require.NoError(t, err)
			n := min(m, len(want))
			require.Len(t, res, n)
			for j := range res {
				require.Equal(t, want[j], res[j].ID)
			}
			assert.Equal(t, len(want) > m, st.Truncated, "query %d cap %d of %d", qi, m, len(want))
			if st.Truncated {
				cut++
			}
		}
	}
	require.Greater(t, cut, 0)
}

// TestRangeBadParams: NaN radius, out-of-range ef and caps, and wrong
// query shapes are ErrBadQuery errors.
func TestRangeBadParams(t *testing.T) {
	x := openIndex(t, openBackend(t, filepath.Join(faiss115Dir, "range_hnsw_flat_l2.faiss"), "memory"), Options{})
	q := make([]float32, x.Dim())
	for _, p := range []RangeParams{
		{Radius: float32(math.NaN())},
		{Radius: 1, EfSearch: -1},
		{Radius: 1, EfSearch: MaxEfSearch + 1},
		{Radius: 1, MaxResults: -1},
		{Radius: 1, MaxResults: MaxRangeResults + 1},
	} {
		_, _, err := x.RangeSearch(q, p, nil)
		require.ErrorIs(t, err, ErrBadQuery, "%+v", p)
	}
	_, _, err := x.RangeSearch(q[:3], RangeParams{Radius: 1}, nil)
	require.ErrorIs(t, err, ErrBadQuery)
	_, _, err = x.RangeSearchBinary([]byte{1}, RangeParams{Radius: 1}, nil)
	require.ErrorIs(t, err, ErrBadQuery)
	// +Inf keeps every node the walk evaluates: as many as it computed
	// level-0 distances for, plus the start node.
	res, st, err := x.RangeSearch(q, RangeParams{Radius: float32(math.Inf(1))}, nil)
	require.NoError(t, err)
	require.Equal(t, st.NDisLevel0+1, len(res))
}

// TestRangeBinaryExact: on a binary index every result is strictly inside
// the radius by its Hamming distance, and with ef large enough to walk the
// whole graph the results are exactly the codes inside, as brute force
// over the stored codes finds them.
func TestRangeBinaryExact(t *testing.T) {
	const name = "binary_hnsw_cagra"
	_, _, qb := loadFAISS115(t, name)
	x := openIndex(t, openBackend(t, filepath.Join(faiss115Dir, name+".faiss"), "memory"), Options{})
	codes := x.codesView
	require.Len(t, codes, int(x.NTotal())*x.Dim())
	for qi, q := range qb[:10] {
		const r = 100
		res, _, err := x.RangeSearchBinary(q, RangeParams{Radius: r, EfSearch: 4000}, nil)
		require.NoError(t, err)
		got := map[int64]float32{}
		for _, h := range res {
			got[h.ID] = h.Distance
		}
		require.Len(t, got, len(res), "no duplicates")
		want := 0
		for i := 0; i < int(x.NTotal()); i++ {
			d := 0
			for j, b := range q {
				d += popcount(b ^ codes[i*len(q)+j])
			}
			if d < r {
				want++
				require.Contains(t, got, int64(i), "query %d: code %d at %d is inside", qi, i, d)
				require.Equal(t, float32(d), got[int64(i)])
			}
		}
		require.Equal(t, want, len(res), "query %d", qi)
		require.Greater(t, want, 0)
	}
}

func popcount(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// TestRangeNoAllocations: with room in dst a range query allocates
// nothing, filtered or not, on an id map.
func TestRangeNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocations are expected")
	}
	const name = "range_idmap_hnsw_flat_l2"
	runs, allow, qf := loadRange115(t, name)
	for _, backend := range []string{"memory", "pread"} {
		s, err := storage.Open(context.Background(), filepath.Join(faiss115Dir, name+".faiss"), storage.Options{Backend: storage.Backend(backend)})
		require.NoError(t, err)
		defer s.Close()
		x := openIndex(t, s, Options{})
		dst := make([]Result, 0, 4096)
		for _, p := range []RangeParams{{Radius: float32(runs[4].Radius)}, {Radius: float32(runs[4].Radius), EfSearch: 64, Filter: allow}} {
			x.RangeSearch(qf[0], p, dst[:0]) // warm the pool and the reverse id map
			allocs := testing.AllocsPerRun(50, func() {
				if _, _, err := x.RangeSearch(qf[0], p, dst[:0]); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs, "%s %+v", backend, p.EfSearch)
		}
	}
}
