package engine_test

import (
	"cmp"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
)

const faiss115 = "../testdata/faiss115"

// range115 is a FAISS 1.15 range fixture: its runs, filter and queries.
type range115 struct {
	testfixtures.FAISS115
	queries [][]float64
}

func loadRange115(t *testing.T, name string) range115 {
	t.Helper()
	f, err := testfixtures.Load115(faiss115, name)
	require.NoError(t, err)
	require.Len(t, f.Range, 12)
	fx := range115{FAISS115: f}
	for _, q := range f.QF {
		fx.queries = append(fx.queries, testfixtures.Float64s(q))
	}
	return fx
}

// TestRadialMatchesFAISS115: max_distance queries return exactly FAISS
// 1.15's range results (l2: the radius; innerproduct: max_distance is
// −radius, FAISS's distance convention), with filters and the IndexIDMap
// quirk, sorted as OpenSearch sorts them: score descending, then id.
func TestRadialMatchesFAISS115(t *testing.T) {
	for _, c := range []struct {
		name  string
		space string
		sign  float64
	}{{"range_hnsw_flat_l2", "l2", 1}, {"range_hnsw_flat_ip", "innerproduct", -1}, {"range_idmap_hnsw_flat_l2", "l2", 1}} {
		fx := loadRange115(t, c.name)
		x, _, err := engine.Open(engine.Spec{Path: filepath.Join(faiss115, c.name+".faiss")})
		require.NoError(t, err)
		defer x.Close()
		require.Equal(t, c.space, x.Space())
		var sc engine.Scratch
		for ri, run := range fx.Range {
			md := c.sign * run.Radius
			r := engine.Request{MaxDistance: &md, EfSearch: run.EfSearch, EfSearchSet: true}
			if run.Filtered {
				r.Filter = fx.Filter.IDs
			}
			qp, err := x.Plan(r)
			require.NoError(t, err)
			require.True(t, qp.Radial())
			require.Equal(t, engine.DefaultMaxRadialResults, qp.K())
			require.EqualValues(t, engine.DefaultMaxRadialResults, qp.Work(), "the cap counts as k")
			for qi, q := range fx.queries {
				hits, prof, err := x.Query(&qp, q, &sc)
				require.NoError(t, err)
				require.False(t, prof.Truncated)
				lo, hi := run.Lims[qi], run.Lims[qi+1]
				want := make([]engine.Hit, 0, hi-lo)
				for j := lo; j < hi; j++ {
					want = append(want, engine.Hit{ID: run.IDs[j], Distance: run.Dist[j], Score: engine.Score(c.space, float32(run.Dist[j]))})
				}
				slices.SortFunc(want, func(a, b engine.Hit) int {
					if v := cmp.Compare(float32(b.Score), float32(a.Score)); v != 0 {
						return v
					}
					return cmp.Compare(a.ID, b.ID)
				})
				require.Len(t, hits, len(want), "%s run %d query %d", c.name, ri, qi)
				for j := range hits {
					require.Equal(t, want[j].ID, hits[j].ID, "%s run %d query %d rank %d", c.name, ri, qi, j)
					require.InDelta(t, want[j].Distance, hits[j].Distance, 1e-5*math.Max(1, math.Abs(want[j].Distance)))
					if j > 0 {
						require.GreaterOrEqual(t, float32(hits[j-1].Score), float32(hits[j].Score))
					}
				}
			}
		}
	}
}

// TestRadialCap: past max_results the hits are the first that many of
// FAISS's order, sorted, and the profile says truncated.
func TestRadialCap(t *testing.T) {
	const name = "range_hnsw_flat_l2"
	fx := loadRange115(t, name)
	x, _, err := engine.Open(engine.Spec{Path: filepath.Join(faiss115, name+".faiss")})
	require.NoError(t, err)
	defer x.Close()
	run := fx.Range[4] // the largest radius at ef 16, unfiltered
	require.False(t, run.Filtered)
	md := run.Radius
	qp, err := x.Plan(engine.Request{MaxDistance: &md, EfSearch: 16, EfSearchSet: true, MaxResults: 5})
	require.NoError(t, err)
	require.EqualValues(t, 16, qp.Work(), "max(cap, ef)")
	cut := 0
	for qi, q := range fx.queries {
		hits, prof, err := x.Query(&qp, q, nil)
		require.NoError(t, err)
		first := run.IDs[run.Lims[qi]:run.Lims[qi+1]]
		require.Equal(t, len(first) > 5, prof.Truncated, "query %d", qi)
		first = first[:min(5, len(first))]
		got := make([]int64, len(hits))
		for j, h := range hits {
			got[j] = h.ID
		}
		assert.ElementsMatch(t, first, got, "query %d: the first 5 FAISS evaluated", qi)
		if prof.Truncated {
			cut++
		}
	}
	require.Greater(t, cut, 10)
}

// TestRadiusTranslation: OpenSearch k-NN's FAISS translations of
// max_distance and min_score to FAISS's radius, per space type, on the
// values OpenSearch's radial integration tests use.
func TestRadiusTranslation(t *testing.T) {
	f := func(v float64) float32 { return float32(v) }
	for _, c := range []struct {
		space    string
		distance bool
		v        float64
		want     float32
	}{
		{"l2", true, 0.5, 0.5},
		{"hamming", true, 3, 3},
		{"innerproduct", true, -0.5, 0.5}, // inner product > 0.5
		{"innerproduct", true, 0.1, -0.1},
		{"cosinesimil", true, 0.1, 1 - f(0.1)}, // cosine > 0.9
		{"l2", false, 0.5, 1},                  // 1/(1+d) ≥ 0.5: d < 1
		{"l2", false, 0.8, 1/f(0.8) - 1},
		{"innerproduct", false, 1.9, f(1.9) - 1},   // ip + 1 ≥ 1.9
		{"innerproduct", false, 0.6, 1 - 1/f(0.6)}, // 1/(1−ip) ≥ 0.6
		{"cosinesimil", false, 0.8, 2*f(0.8) - 1},
	} {
		var got float32
		var err error
		if c.distance {
			got, err = engine.DistanceRadius(c.space, c.v)
		} else {
			got, err = engine.ScoreRadius(c.space, c.v)
		}
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.want, got, "%+v", c)
	}
	for _, c := range []struct {
		space    string
		distance bool
		v        float64
	}{
		{"l2", true, -1}, {"cosinesimil", true, -0.1}, {"l2", true, math.NaN()}, {"innerproduct", true, math.Inf(-1)},
		{"l2", true, 1e39}, {"l2", false, 0}, {"l2", false, -0.5}, {"l2", false, 1.5}, {"cosinesimil", false, 2},
		{"innerproduct", false, math.NaN()}, {"innerproduct", false, 1e40},
	} {
		var err error
		if c.distance {
			_, err = engine.DistanceRadius(c.space, c.v)
		} else {
			_, err = engine.ScoreRadius(c.space, c.v)
		}
		require.ErrorIs(t, err, engine.ErrBadRequest, "%+v", c)
	}
}

// TestRadialMinScore: min_score returns hits scoring at least the score,
// all the walk finds: the same as max_distance at the translated radius.
func TestRadialMinScore(t *testing.T) {
	const name = "range_hnsw_flat_ip"
	fx := loadRange115(t, name)
	x, _, err := engine.Open(engine.Spec{Path: filepath.Join(faiss115, name+".faiss")})
	require.NoError(t, err)
	defer x.Close()
	ms := 36.0 // inner product > 35
	qp, err := x.Plan(engine.Request{MinScore: &ms, EfSearch: 64, EfSearchSet: true})
	require.NoError(t, err)
	md := -35.0
	qd, err := x.Plan(engine.Request{MaxDistance: &md, EfSearch: 64, EfSearchSet: true})
	require.NoError(t, err)
	total := 0
	for qi, q := range fx.queries {
		hits, _, err := x.Query(&qp, q, nil)
		require.NoError(t, err)
		for _, h := range hits {
			require.Greater(t, h.Score, ms, "query %d", qi)
		}
		same, _, err := x.Query(&qd, q, nil)
		require.NoError(t, err)
		require.Equal(t, same, hits)
		total += len(hits)
	}
	require.Greater(t, total, 100)
}

// TestRadialErrors: a radial request is refused with ErrBadRequest for
// both of max_distance and min_score, a bad cap, or rescore.
func TestRadialErrors(t *testing.T) {
	x, _, err := engine.Open(engine.Spec{Path: filepath.Join(faiss115, "range_hnsw_flat_l2.faiss")})
	require.NoError(t, err)
	defer x.Close()
	one, neg := 1.0, -1.0
	for _, r := range []engine.Request{
		{MaxDistance: &one, MinScore: &one},
		{MaxDistance: &one, MaxResults: -1},
		{MaxDistance: &one, MaxResults: hnswsearch.MaxRangeResults + 1},
		{MaxDistance: &neg},
		{MinScore: &neg},
		{MaxDistance: &one, Rescore: &engine.Rescore{Oversample: 2}},
		{MaxDistance: &one, EfSearch: 0, EfSearchSet: true},
	} {
		_, err := x.Plan(r)
		require.ErrorIs(t, err, engine.ErrBadRequest, "%+v", r)
	}
}

// TestOnDiskRadial: in mode on_disk a radial query walks the guide, reranks
// and checks the radius on exact distances: every hit is strictly inside
// it by FAISS's exact distance, and the hits find FAISS's exact neighbours
// inside the radius (the 9 nearest, at the 10th's distance).
func TestOnDiskRadial(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "ondisk", "clustered_l2.json"))
	require.NoError(t, err)
	var fx onDiskFixture
	require.NoError(t, json.Unmarshal(raw, &fx))
	x, _, err := engine.Open(engine.Spec{Path: filepath.Join("..", "testdata", "ondisk", "clustered_l2.faiss"),
		Mode: engine.ModeOnDisk, Compression: "4x", GuideDir: t.TempDir()})
	require.NoError(t, err)
	defer x.Close()
	var found, want float64
	for qi, q := range fx.Queries {
		r := fx.Exact.Dist[qi][9]
		qp, err := x.Plan(engine.Request{MaxDistance: &r, EfSearch: 64, EfSearchSet: true})
		require.NoError(t, err)
		hits, prof, err := x.Query(&qp, q, nil)
		require.NoError(t, err)
		require.NotNil(t, prof.Rerank, "radial on_disk reranks")
		require.Equal(t, prof.NDis, prof.GuideDistances)
		got := map[int64]bool{}
		for _, h := range hits {
			require.Less(t, h.Distance, r)
			got[h.ID] = true
		}
		for j, id := range fx.Exact.IDs[qi][:9] {
			if fx.Exact.Dist[qi][j] < r {
				want++
				if got[id] {
					found++
				}
			}
		}
	}
	t.Logf("on_disk radial recall of the exact neighbours inside the radius: %.3f", found/want)
	require.GreaterOrEqual(t, found/want, 0.9)
}

// TestOnDiskRadialShortlistCut: when more nodes are inside the radius by the
// guide's distances than the shortlist reranks, the answer says it was
// truncated (here 100 of the 2000 vectors, all inside the radius).
func TestOnDiskRadialShortlistCut(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "ondisk", "clustered_l2.json"))
	require.NoError(t, err)
	var fx onDiskFixture
	require.NoError(t, json.Unmarshal(raw, &fx))
	x, _, err := engine.Open(engine.Spec{Path: filepath.Join("..", "testdata", "ondisk", "clustered_l2.faiss"),
		Mode: engine.ModeOnDisk, Compression: "4x", GuideDir: t.TempDir(), Rerank: &engine.RerankSpec{Oversample: 0.01}})
	require.NoError(t, err)
	defer x.Close()
	everything := 1e30
	qp, err := x.Plan(engine.Request{MaxDistance: &everything, EfSearch: 4000, EfSearchSet: true})
	require.NoError(t, err)
	hits, prof, err := x.Query(&qp, fx.Queries[0], nil)
	require.NoError(t, err)
	assert.Len(t, hits, 100, "the shortlist: max(100, ⌈2000·0.01⌉)")
	assert.True(t, prof.Truncated, "1900 nodes inside the radius were not reranked")
}
