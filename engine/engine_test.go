package engine_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

const fixtures = "../testdata/fixtures"

func fixture(name string) string { return filepath.Join(fixtures, name) }

// budgetFor is a memory budget that leaves held bytes to the policy beyond
// the Go heap's share.
func budgetFor(t *testing.T, name string, held int64) int64 {
	pf, err := engine.Probe(fixture(name), "direct")
	require.NoError(t, err)
	p, err := hnswsearch.PlanBudget(pf, true, 1<<40, runtime.GOMAXPROCS(0))
	require.NoError(t, err)
	return p.HeapBytes + held
}

// TestQueryMatchesFAISS: every mode and backend, and the memory budget
// policy, answer FAISS 1.7.3's results (its semantics, exact kernel) for
// float and binary fixtures, plain, with ef_search and filtered; hits are
// the real ones only, scored by the space type.
func TestQueryMatchesFAISS(t *testing.T) {
	for _, name := range []string{"idmap_hnsw", "bin_idmap_hnsw"} {
		f, err := testfixtures.Load(fixtures, name)
		require.NoError(t, err)
		for _, c := range []struct {
			mode          engine.Mode
			backend, want engine.Backend
			budget        int64
		}{
			{"full", "", "memory", 0},
			{"", "", "mmap", 0},
			{"memory_efficient", "pread", "pread", 0},
			{"memory_efficient", "direct", "direct", 0},
			{"memory_efficient", "", "direct", budgetFor(t, name+".faiss", 64<<10)},
		} {
			x, plan, err := engine.Open(engine.Spec{Path: fixture(name + ".faiss"), Mode: c.mode, Backend: c.backend,
				MemoryBudget: c.budget, Semantics: "faiss-1.7.3", Kernel: "exact"})
			require.NoError(t, err, "%s %+v", name, c)
			assert.Equal(t, c.want, x.Backend(), "%s %+v", name, c)
			assert.Equal(t, c.want, plan.Backend())
			space := "l2"
			if f.Binary {
				space = "hamming"
			}
			assert.Equal(t, space, x.Space())
			var sc engine.Scratch
			checked := 0
			for ri, run := range f.Runs {
				r := engine.Request{K: run.K, Filter: run.AllowIDs}
				if run.EfSearch != nil {
					r.EfSearch, r.EfSearchSet = *run.EfSearch, true
				}
				qp, err := x.Plan(r)
				require.NoError(t, err)
				for qi, q := range f.Queries {
					hits, prof, err := x.Query(&qp, q, &sc)
					require.NoError(t, err)
					n := 0
					for j, id := range run.IDs[qi] {
						if id < 0 {
							continue
						}
						require.Less(t, n, len(hits), "%s %+v run %d query %d", name, c, ri, qi)
						assert.Equal(t, id, hits[n].ID, "%s %+v run %d query %d rank %d", name, c, ri, qi, j)
						assert.Equal(t, float32(run.Dist[qi][j]), float32(hits[n].Distance), "%s %+v run %d query %d rank %d", name, c, ri, qi, j)
						assert.Equal(t, 1/(1+hits[n].Distance), hits[n].Score)
						n++
					}
					assert.Len(t, hits, n, "only real hits")
					assert.Positive(t, prof.NDis)
					checked++
				}
			}
			assert.Positive(t, checked)
			x.Close()
		}
	}
}

// TestPlanNeedBytes: what a load is charged: the small arrays plus the
// whole file (full), nothing more (mmap), the cache capped at what the
// file can fill (pread), or the whole memory budget, whose Go heap share
// is reported apart.
func TestPlanNeedBytes(t *testing.T) {
	path := fixture("hnsw_flat_large.faiss")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	pf, err := engine.Probe(path, "pread")
	require.NoError(t, err)
	small := pf.ResidentBytes()
	require.Positive(t, small)

	p, err := engine.Prepare(engine.Spec{Path: path, Mode: "full"})
	require.NoError(t, err)
	assert.Equal(t, small+fi.Size(), p.NeedBytes())
	assert.Zero(t, p.HeapBytes())

	p, err = engine.Prepare(engine.Spec{Path: path})
	require.NoError(t, err)
	assert.Equal(t, engine.BackendMmap, p.Backend())
	assert.Equal(t, small, p.NeedBytes())

	p, err = engine.Prepare(engine.Spec{Path: path, Backend: "pread", CacheBytes: 1 << 30})
	require.NoError(t, err)
	cache := p.NeedBytes() - small
	assert.GreaterOrEqual(t, cache, fi.Size()+fi.Size()/8, "enough to mirror the file")
	assert.LessOrEqual(t, cache, fi.Size()+fi.Size()/8+2*4096, "no more than the mirror needs")

	budget := budgetFor(t, "hnsw_flat_large.faiss", 256<<10)
	p, err = engine.Prepare(engine.Spec{Path: path, MemoryBudget: budget})
	require.NoError(t, err)
	assert.Equal(t, engine.BackendDirect, p.Backend(), "direct under a budget")
	assert.Equal(t, budget, p.NeedBytes())
	assert.Equal(t, budget-256<<10, p.HeapBytes())
	x, err := p.Open()
	require.NoError(t, err)
	defer x.Close()
	assert.True(t, x.Options().BatchReads)
	assert.Positive(t, x.PinnedBytes()+x.VectorCache().Bytes+int64(x.VectorCache().Slots), "the held bytes are spent")
}

// TestRescoreMatchesFAISSBruteForce: a filtered query rescored from a
// shortlist holding every allowed id gives FAISS's brute force over those
// ids (the vectors are the index's own, read from its file).
func TestRescoreMatchesFAISSBruteForce(t *testing.T) {
	f, err := testfixtures.Load(fixtures, "hnsw_flat_l2")
	require.NoError(t, err)
	x, _, err := engine.Open(engine.Spec{Path: fixture("hnsw_flat_l2.faiss"),
		Rerank: &engine.RerankSpec{Path: fixture("hnsw_flat_l2.faiss"), Strategy: "pread"}})
	require.NoError(t, err)
	defer x.Close()
	require.True(t, x.HasRerank())
	assert.Equal(t, "pread", x.RerankStrategy())
	checked := 0
	for _, run := range f.Runs {
		if run.Exact == nil {
			continue
		}
		qp, err := x.Plan(engine.Request{K: run.K, Filter: run.AllowIDs, Rescore: &engine.Rescore{Oversample: 100}})
		require.NoError(t, err)
		require.GreaterOrEqual(t, x.ShortlistSize(run.K, 100), len(run.AllowIDs))
		for qi, q := range f.Queries {
			hits, prof, err := x.Query(&qp, q, nil)
			require.NoError(t, err)
			require.NotNil(t, prof.Rerank)
			want := min(run.K, len(run.AllowIDs))
			require.Len(t, hits, want)
			for r, h := range hits {
				d := run.Exact.Dist[qi][r]
				assert.InDelta(t, d, h.Distance, 1e-4*math.Max(1, d), "query %d rank %d", qi, r)
				tie := (r > 0 && float32(run.Exact.Dist[qi][r-1]) == float32(d)) || (r+1 < want && float32(run.Exact.Dist[qi][r+1]) == float32(d))
				if !tie {
					assert.Equal(t, run.Exact.IDs[qi][r], h.ID, "query %d rank %d", qi, r)
				}
			}
			checked++
		}
	}
	assert.Positive(t, checked)
}

// TestRescoreFillsAsFAISS: the CLI's rescored output keeps FAISS's shape:
// k rows, missing ones id −1 at the worst distance.
func TestRescoreFillsAsFAISS(t *testing.T) {
	x, _, err := engine.Open(engine.Spec{Path: fixture("hnsw_flat_l2.faiss"),
		Rerank: &engine.RerankSpec{Path: fixture("hnsw_flat_l2.faiss")}})
	require.NoError(t, err)
	defer x.Close()
	f, err := testfixtures.Load(fixtures, "hnsw_flat_l2")
	require.NoError(t, err)
	q, _ := f.Query(0)
	allow := []int64{3, 7}
	qp, err := x.Plan(engine.Request{K: 5, Filter: allow})
	require.NoError(t, err)
	require.Positive(t, qp.Shortlist(), "the plan rescores")
	res, _, err := x.Search(&qp, engine.Query{Vector: q}, nil)
	require.NoError(t, err)
	require.Len(t, res, 5)
	assert.ElementsMatch(t, allow, []int64{res[0].ID, res[1].ID})
	for _, r := range res[2:] {
		assert.Equal(t, int64(-1), r.ID)
		assert.Equal(t, int32(-1), r.Label)
		assert.Equal(t, float32(math.MaxFloat32), r.Distance)
	}
}

// TestSpecErrors: each bad spec fails with the error class the front ends
// map (a usage error or 400, a 422), naming the problem.
func TestSpecErrors(t *testing.T) {
	idx := fixture("idmap_hnsw.faiss")
	for _, c := range []struct {
		spec engine.Spec
		is   error
		msg  string
	}{
		{engine.Spec{Path: idx, Mode: "warm"}, engine.ErrBadSpec, `unknown mode "warm"`},
		{engine.Spec{Path: idx, Backend: "floppy"}, engine.ErrBadSpec, `unknown backend "floppy"`},
		{engine.Spec{Path: idx, Mode: "full", Backend: "mmap"}, engine.ErrBadSpec, "mode full"},
		{engine.Spec{Path: idx, Semantics: "faiss-2"}, engine.ErrBadSpec, `unknown semantics "faiss-2"`},
		{engine.Spec{Path: idx, Kernel: "slow"}, engine.ErrBadSpec, `unknown kernel "slow"`},
		{engine.Spec{Path: idx, CacheBytes: -1}, engine.ErrBadSpec, "cache_bytes -1 is negative"},
		{engine.Spec{Path: idx, MemoryBudget: -1}, engine.ErrBadSpec, "memory_budget -1 is negative"},
		{engine.Spec{Path: idx, CacheBlock: 1000}, engine.ErrBadSpec, "block size 1000"},
		{engine.Spec{Path: idx, Mode: "full", MemoryBudget: 1 << 30}, engine.ErrBadSpec, "memory_budget applies to mode memory_efficient"},
		{engine.Spec{Path: idx, ExactFilterMax: -2}, engine.ErrBadSpec, "exact_filter_max -2"},
		{engine.Spec{Path: idx, EfSearch: hnswsearch.MaxEfSearch + 1}, engine.ErrBadSpec, "index ef_search"},
		{engine.Spec{Path: idx, SpaceType: "manhattan"}, engine.ErrBadSpec, `unknown space_type "manhattan"`},
		{engine.Spec{Path: idx, SpaceType: "innerproduct"}, engine.ErrBadSpec, `space_type "innerproduct" needs a IP index, this index is L2`},
		{engine.Spec{Path: idx, Rerank: &engine.RerankSpec{Path: idx, Strategy: "telepathy"}}, engine.ErrBadSpec, `unknown rerank.strategy "telepathy"`},
		{engine.Spec{Path: idx, Rerank: &engine.RerankSpec{Path: idx, Oversample: -1}}, engine.ErrBadSpec, "rerank.oversample_factor -1 is negative"},
		{engine.Spec{Path: idx, Backend: "zstd"}, engine.ErrBackendMismatch, "backend zstd reads files in the zstd seekable format"},
		{engine.Spec{Path: fixture("flat_l2.faiss")}, engine.ErrNotServable, "has no HNSW graph"},
		{engine.Spec{Path: idx, MemoryBudget: 100000}, hnswsearch.ErrBudget, "memory budget too small: 100000 bytes"},
	} {
		x, _, err := engine.Open(c.spec)
		if !assert.Error(t, err, "%+v", c.spec) {
			x.Close()
			continue
		}
		assert.ErrorIs(t, err, c.is, "%+v", c.spec)
		assert.Contains(t, err.Error(), c.msg)
		if c.is == engine.ErrBadSpec || c.is == engine.ErrBackendMismatch {
			assert.ErrorIs(t, err, partial.ErrBadOption, "front ends map it as a bad option")
		}
		if c.is != engine.ErrBadSpec {
			assert.NotErrorIs(t, err, engine.ErrBadSpec, "%+v: depends on the file, not a usage error", c.spec)
		}
	}
}

// TestQueryErrors: k, ef_search, the vector and rescore are checked before
// any search, with ErrBadRequest.
func TestQueryErrors(t *testing.T) {
	x, _, err := engine.Open(engine.Spec{Path: fixture("idmap_hnsw.faiss"), SpaceType: "l2"})
	require.NoError(t, err)
	defer x.Close()
	for _, c := range []struct {
		r   engine.Request
		msg string
	}{
		{engine.Request{K: 0}, "k=0 is out of range [1, 10000]"},
		{engine.Request{K: hnswsearch.MaxK + 1}, "k=10001 is out of range"},
		{engine.Request{K: 10, EfSearchSet: true}, "ef_search=0 is out of range"},
		{engine.Request{K: 10, EfSearch: 101, EfSearchSet: true, MaxEfSearch: 100}, "ef_search=101 is out of range [1, 100]"},
		{engine.Request{K: 10, Rescore: &engine.Rescore{}}, "rescore needs an index loaded with rerank"},
	} {
		_, err := x.Plan(c.r)
		require.Error(t, err, "%+v", c.r)
		assert.ErrorIs(t, err, engine.ErrBadRequest)
		assert.Contains(t, err.Error(), c.msg)
	}
	require.NoError(t, engine.Request{K: 10}.Check(), "ef 0 not given: the index's")
	qp, err := x.Plan(engine.Request{K: 10})
	require.NoError(t, err)
	for _, c := range []struct {
		vec []float64
		msg string
	}{
		{nil, "vector is required"},
		{[]float64{}, "vector is required: index " + fixture("idmap_hnsw.faiss") + " expects 20 values"},
		{[]float64{1, 2, 3}, "vector has 3 values, index " + fixture("idmap_hnsw.faiss") + " expects"},
		{append(make([]float64, x.Dim()-1), math.NaN()), "is not a finite float32"},
		{append(make([]float64, x.Dim()-1), 1e39), "is not a finite float32"},
		{append(make([]float64, x.Dim()-2), 3e38, -3e38), "beyond float32's range"},
	} {
		_, _, err := x.Query(&qp, c.vec, nil)
		require.Error(t, err)
		assert.ErrorIs(t, err, engine.ErrBadRequest)
		assert.Contains(t, err.Error(), c.msg)
	}
}

// TestQueryScratchNoAllocs: a query in reused scratch allocates nothing.
func TestQueryScratchNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items (the search's own scratch)")
	}
	x, _, err := engine.Open(engine.Spec{Path: fixture("hnsw_flat_large.faiss"), Mode: "full"})
	require.NoError(t, err)
	defer x.Close()
	f, err := testfixtures.Load(fixtures, "hnsw_flat_large")
	require.NoError(t, err)
	qp, err := x.Plan(engine.Request{K: 10})
	require.NoError(t, err)
	var sc engine.Scratch
	_, _, err = x.Query(&qp, f.Queries[0], &sc)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(50, func() {
		if _, _, err := x.Query(&qp, f.Queries[1], &sc); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// TestCheckFileAndWarm: a served file replaced under the index is
// reported changed; warming a pread index fills its cache.
func TestCheckFileAndWarm(t *testing.T) {
	src, err := os.ReadFile(fixture("idmap_hnsw.faiss"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "i.faiss")
	require.NoError(t, os.WriteFile(path, src, 0o644))
	x, _, err := engine.Open(engine.Spec{Path: path, Backend: "pread"})
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Warm())
	st, ok := x.StorageStats()
	require.True(t, ok)
	assert.Positive(t, st.ResidentBytes)
	require.NoError(t, x.CheckFile())
	require.NoError(t, os.WriteFile(path+".new", src, 0o644))
	require.NoError(t, os.Rename(path+".new", path))
	assert.ErrorIs(t, x.CheckFile(), partial.ErrFileChanged)
}

// TestBinaryRerankPlansNoShortlist: a binary index loaded with rerank
// vectors answers a request (whose vector is the binary code, not a float
// query) with k hits from the graph, and an explicit rescore is a 400-class
// error rather than shortlist-size hits.
func TestBinaryRerankPlansNoShortlist(t *testing.T) {
	x := openBinaryWithRerank(t)
	code := make([]float64, x.Dim())
	qp, err := x.Plan(engine.Request{K: 3})
	require.NoError(t, err)
	hits, _, err := x.Query(&qp, code, nil)
	require.NoError(t, err)
	assert.Len(t, hits, 3)
	_, err = x.Plan(engine.Request{K: 3, Rescore: &engine.Rescore{Oversample: 2}})
	assert.ErrorIs(t, err, engine.ErrBadRequest)
}

// TestModeBackend: the mode → backend rule: full is memory; memory_efficient
// defaults to mmap for a plain file and zstd for a seekable zstd one; bad
// combinations and names are bad specs.
func TestModeBackend(t *testing.T) {
	plain := fixture("idmap_hnsw.faiss")
	src, err := os.Open(plain)
	require.NoError(t, err)
	defer src.Close()
	zpath := filepath.Join(t.TempDir(), "idx.faiss.zst")
	dst, err := os.Create(zpath)
	require.NoError(t, err)
	_, err = zstd.CompressSeekable(dst, src, 4096, 1, nil)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	for _, c := range []struct {
		mode    engine.Mode
		backend engine.Backend
		path    string
		want    engine.Backend
	}{
		{"full", "", plain, "memory"},
		{"full", "memory", plain, "memory"},
		{"", "", plain, "mmap"},
		{"memory_efficient", "", plain, engine.DefaultMemoryEfficientBackend},
		{"memory_efficient", "", zpath, "zstd"},
		{"memory_efficient", "", "", "mmap"}, // no file: the names alone are checked
		{"memory_efficient", "pread", plain, "pread"},
	} {
		got, err := engine.ModeBackend(c.mode, c.backend, c.path)
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.want, got, "%+v", c)
	}
	for _, c := range []struct {
		mode    engine.Mode
		backend engine.Backend
		msg     string
	}{
		{"full", "mmap", "mode full reads the whole file into memory"},
		{"memory_efficient", "memory", "backend memory is mode full"},
		{"", "floppy", `unknown backend "floppy"`},
		{"warm", "", `unknown mode "warm"`},
	} {
		_, err := engine.ModeBackend(c.mode, c.backend, plain)
		require.Error(t, err, "%+v", c)
		assert.ErrorIs(t, err, engine.ErrBadSpec)
		assert.ErrorIs(t, err, partial.ErrBadOption)
		assert.Contains(t, err.Error(), c.msg)
	}
}

// TestSearchBatchFAISS: the CLI's batch answers FAISS 1.7.3's rows exactly
// (−1 fills included), float and binary, plain, with ef_search and
// filtered; with rerank vectors, the rescored rows are FAISS's exact
// search, filled to k as FAISS fills.
func TestSearchBatchFAISS(t *testing.T) {
	for _, name := range []string{"idmap_hnsw", "bin_idmap_hnsw"} {
		f, err := testfixtures.Load(fixtures, name)
		require.NoError(t, err)
		x, _, err := engine.Open(engine.Spec{Path: fixture(name + ".faiss"), Semantics: "faiss-1.7.3", Kernel: "exact"})
		require.NoError(t, err)
		qs := make([]engine.Query, len(f.Queries))
		for i := range qs {
			qs[i].Vector, qs[i].Code = f.Query(i)
		}
		for ri, run := range f.Runs {
			r := engine.Request{K: run.K, Filter: run.AllowIDs}
			if run.EfSearch != nil {
				r.EfSearch, r.EfSearchSet = *run.EfSearch, true
			}
			qp, err := x.Plan(r)
			require.NoError(t, err)
			for _, workers := range []int{1, 3} {
				res := x.SearchBatch(&qp, qs, workers)
				require.Len(t, res, len(qs))
				for qi, br := range res {
					require.NoError(t, br.Err)
					require.Len(t, br.Hits, run.K, "%s run %d query %d", name, ri, qi)
					for j, h := range br.Hits {
						assert.Equal(t, run.IDs[qi][j], h.ID, "%s run %d query %d rank %d", name, ri, qi, j)
						if run.IDs[qi][j] >= 0 {
							assert.Equal(t, float32(run.Dist[qi][j]), h.Distance, "%s run %d query %d rank %d", name, ri, qi, j)
						}
					}
				}
			}
		}
		x.Close()
	}

	f, err := testfixtures.Load(fixtures, "hnsw_flat_l2")
	require.NoError(t, err)
	x, _, err := engine.Open(engine.Spec{Path: fixture("hnsw_flat_l2.faiss"),
		Rerank: &engine.RerankSpec{Path: fixture("hnsw_flat_l2.faiss"), Strategy: "pread"}})
	require.NoError(t, err)
	defer x.Close()
	qs := make([]engine.Query, len(f.Queries))
	for i := range qs {
		qs[i].Vector, _ = f.Query(i)
	}
	checked := 0
	for _, run := range f.Runs {
		if run.Exact == nil {
			continue
		}
		qp, err := x.Plan(engine.Request{K: run.K, Filter: run.AllowIDs, Rescore: &engine.Rescore{Oversample: 100}})
		require.NoError(t, err)
		res := x.SearchBatch(&qp, qs, 2)
		for qi, br := range res {
			require.NoError(t, br.Err)
			require.Len(t, br.Hits, run.K)
			for j, h := range br.Hits {
				want := run.Exact.IDs[qi][j]
				if want < 0 {
					assert.Equal(t, int64(-1), h.ID)
					assert.Equal(t, float32(math.MaxFloat32), h.Distance)
					continue
				}
				d := run.Exact.Dist[qi][j]
				assert.InDelta(t, d, h.Distance, 1e-4*math.Max(1, d), "query %d rank %d", qi, j)
				tie := (j > 0 && float32(run.Exact.Dist[qi][j-1]) == float32(d)) || (j+1 < run.K && float32(run.Exact.Dist[qi][j+1]) == float32(d))
				if !tie {
					assert.Equal(t, want, h.ID, "query %d rank %d", qi, j)
				}
			}
			checked++
		}
	}
	assert.Positive(t, checked)
	// One query with its own float query, as the CLI passes --rerank-queries.
	qp, err := x.Plan(engine.Request{K: 5, Filter: []int64{3, 7}, RescoreBinary: true})
	require.NoError(t, err)
	rows, _, err := x.Search(&qp, engine.Query{Vector: qs[0].Vector, Rescore: qs[0].Vector}, nil)
	require.NoError(t, err)
	require.Len(t, rows, 5)
	assert.ElementsMatch(t, []int64{3, 7}, []int64{rows[0].ID, rows[1].ID})
	assert.Equal(t, int64(-1), rows[4].ID)
}

// TestSearchFAISSBinaryRerankNeedsFloats: a binary index's shortlist is
// rescored only with a float query given beside its code; with one, the
// rows are ranked by its L2 distance to the rerank vectors.
func TestSearchFAISSBinaryRerankNeedsFloats(t *testing.T) {
	x := openBinaryWithRerank(t)
	code := make([]byte, x.Dim())
	qp, err := x.Plan(engine.Request{K: 3, RescoreBinary: true})
	require.NoError(t, err)
	_, _, err = x.Search(&qp, engine.Query{Code: code}, nil)
	require.ErrorIs(t, err, engine.ErrBadRequest)
	assert.Contains(t, err.Error(), "needs float queries")
	allow := []int64{1, 2, 3, 40}
	qp, err = x.Plan(engine.Request{K: 5, Filter: allow, RescoreBinary: true})
	require.NoError(t, err)
	rows, _, err := x.Search(&qp, engine.Query{Code: code, Rescore: []float32{2, 2, 2, 2}}, nil)
	require.NoError(t, err)
	require.Len(t, rows, 5)
	assert.Equal(t, int64(2), rows[0].ID)
	assert.Equal(t, float32(0), rows[0].Distance)
	assert.ElementsMatch(t, []int64{1, 3}, []int64{rows[1].ID, rows[2].ID})
	assert.Equal(t, int64(40), rows[3].ID)
	assert.Equal(t, int64(-1), rows[4].ID)
	assert.Equal(t, float32(math.MaxFloat32), rows[4].Distance)
}

// TestCheckSpecFields: each static rule fails with a FieldError naming its
// field, worded with the API's names by Error and with a front end's own
// by Message; a good spec passes without a file.
func TestCheckSpecFields(t *testing.T) {
	flags := map[string]string{"mode": "--mode", "memory_budget": "--memory-budget", "cache_bytes": "--cache-bytes",
		"rerank.strategy": "--rerank-strategy", "rerank.oversample_factor": "--oversample"}
	for _, c := range []struct {
		spec              engine.Spec
		field, api, front string
	}{
		{engine.Spec{Mode: "warm"}, "mode", `unknown mode "warm"`, `unknown mode "warm"`},
		{engine.Spec{Backend: "floppy"}, "backend", `unknown backend "floppy"`, `unknown backend "floppy"`},
		{engine.Spec{Mode: "full", Backend: "mmap"}, "backend", "mode full reads the whole file", "mode full reads the whole file"},
		{engine.Spec{Semantics: "x"}, "semantics", `unknown semantics "x"`, `unknown semantics "x"`},
		{engine.Spec{Kernel: "x"}, "kernel", `unknown kernel "x"`, `unknown kernel "x"`},
		{engine.Spec{CacheBlock: 1000}, "cache_block", "block size 1000", "block size 1000"},
		{engine.Spec{CacheBytes: -3}, "cache_bytes", "cache_bytes -3 is negative", "--cache-bytes -3 is negative"},
		{engine.Spec{MemoryBudget: -5}, "memory_budget", "memory_budget -5 is negative", "--memory-budget -5 is negative"},
		{engine.Spec{Mode: "full", MemoryBudget: 1}, "memory_budget", `memory_budget applies to mode memory_efficient and on_disk, not "full"`,
			`--memory-budget applies to --mode memory_efficient and on_disk, not "full"`},
		{engine.Spec{ExactFilterMax: -2}, "exact_filter_max", "exact_filter_max -2: use a count", "exact_filter_max -2: use a count"},
		{engine.Spec{EfSearch: -1}, "ef_search", "ef_search=-1 is negative", "ef_search=-1 is negative"},
		{engine.Spec{SpaceType: "x"}, "space_type", `unknown space_type "x"`, `unknown space_type "x"`},
		{engine.Spec{Rerank: &engine.RerankSpec{Strategy: "x"}}, "rerank.strategy", `unknown rerank.strategy "x"`, `unknown --rerank-strategy "x"`},
		{engine.Spec{Rerank: &engine.RerankSpec{Oversample: -1}}, "rerank.oversample_factor", "rerank.oversample_factor -1 is negative", "--oversample -1 is negative"},
		{engine.Spec{Rerank: &engine.RerankSpec{Metric: "l3"}}, "rerank.metric", `unknown rerank.metric "l3"`, `unknown rerank.metric "l3"`},
	} {
		err := engine.CheckSpec(c.spec)
		var fe *engine.FieldError
		require.ErrorAs(t, err, &fe, "%+v", c.spec)
		assert.Equal(t, c.field, fe.Field)
		assert.ErrorIs(t, err, engine.ErrBadSpec)
		assert.ErrorIs(t, err, partial.ErrBadOption)
		assert.Contains(t, err.Error(), c.api)
		assert.Contains(t, fe.Message(func(f string) string { return flags[f] }), c.front)
	}
	spec := engine.Spec{Rerank: &engine.RerankSpec{}}
	require.NoError(t, engine.CheckSpec(spec))
	assert.Empty(t, spec.Rerank.Strategy, "CheckSpec fills no defaults into the caller's spec")
	// Prepare applies the same rules, with the same errors.
	_, err := engine.Prepare(engine.Spec{Path: fixture("idmap_hnsw.faiss"), CacheBytes: -3})
	var fe *engine.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "cache_bytes", fe.Field)
}

// openBinaryWithRerank opens bin_hnsw.faiss with float rerank vectors of 4
// dimensions, vector i being (i, i, i, i): the nearest to (2, 2, 2, 2) are
// 2, then 1 and 3. It is closed when the test ends.
func openBinaryWithRerank(t *testing.T) *engine.Index {
	probe, _, err := engine.Open(engine.Spec{Path: fixture("bin_hnsw.faiss")})
	require.NoError(t, err)
	n := int(probe.NTotal())
	probe.Close()
	vecs := filepath.Join(t.TempDir(), "v.fvecs")
	var b []byte
	for i := range n {
		b = binary.LittleEndian.AppendUint32(b, 4)
		for range 4 {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(i)))
		}
	}
	require.NoError(t, os.WriteFile(vecs, b, 0o644))
	x, _, err := engine.Open(engine.Spec{Path: fixture("bin_hnsw.faiss"), Rerank: &engine.RerankSpec{Path: vecs, Strategy: "pread"}})
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return x
}
