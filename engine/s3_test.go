package engine_test

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// TestS3MatchesFAISS: an index served from s3://BUCKET/KEY, in modes full
// (downloaded whole), memory_efficient (the s3 backend behind a block
// cache) and memory_efficient under a memory budget (the object alone, its
// misses read in parallel batches), answers FAISS 1.7.3's results, hit for
// hit as the local file.
func TestS3MatchesFAISS(t *testing.T) {
	bucket := s3test.Bucket(t)
	for _, name := range []string{"idmap_hnsw", "bin_idmap_hnsw", "hnsw_flat_large"} {
		f, err := testfixtures.Load(fixtures, name)
		require.NoError(t, err)
		u := s3test.PutFile(t, bucket, "idx/"+name+".faiss", fixture(name+".faiss"))
		budget := budgetFor(t, name+".faiss", 64<<10)
		for _, c := range []struct {
			mode   engine.Mode
			want   engine.Backend
			budget int64
		}{{"full", "memory", 0}, {"memory_efficient", "s3", 0}, {"", "s3", 0}, {"memory_efficient", "", budget}} {
			spec := engine.Spec{Path: u, Mode: c.mode, MemoryBudget: c.budget, Semantics: "faiss-1.7.3", Kernel: "exact"}
			x, plan, err := engine.Open(spec)
			require.NoError(t, err, "%s %+v", name, c)
			if c.want != "" {
				assert.Equal(t, c.want, x.Backend(), "%s %+v", name, c)
				assert.Equal(t, c.want, plan.Backend())
			}
			spec.Path = fixture(name + ".faiss")
			lx, _, err := engine.Open(spec)
			require.NoError(t, err)
			var sc, lsc engine.Scratch
			checked := 0
			runs := f.Runs
			if c.budget > 0 {
				runs = runs[:2] // nothing cached: every query's reads are GETs
			}
			for ri, run := range runs {
				r := engine.Request{K: run.K, Filter: run.AllowIDs}
				if run.EfSearch != nil {
					r.EfSearch, r.EfSearchSet = *run.EfSearch, true
				}
				qp, err := x.Plan(r)
				require.NoError(t, err)
				lqp, err := lx.Plan(r)
				require.NoError(t, err)
				for qi, q := range f.Queries {
					hits, _, err := x.Query(&qp, q, &sc)
					require.NoError(t, err)
					n := 0
					for j, id := range run.IDs[qi] {
						if id < 0 {
							continue
						}
						require.Less(t, n, len(hits), "%s %+v run %d query %d", name, c, ri, qi)
						assert.Equal(t, id, hits[n].ID, "%s %+v run %d query %d rank %d", name, c, ri, qi, j)
						assert.Equal(t, float32(run.Dist[qi][j]), float32(hits[n].Distance), "%s %+v run %d query %d rank %d", name, c, ri, qi, j)
						n++
					}
					assert.Len(t, hits, n, "only real hits")
					lhits, _, err := lx.Query(&lqp, q, &lsc)
					require.NoError(t, err)
					assert.Equal(t, lhits, hits, "%s %+v run %d query %d: as the local file", name, c, ri, qi)
					checked++
				}
			}
			assert.Positive(t, checked)
			require.NoError(t, x.CheckFile())
			x.Close()
			lx.Close()
		}
	}
}

// TestS3ReplacedWhileServed: an object replaced while an index serves it
// in memory_efficient mode fails the queries that need bytes not yet
// cached with ErrFileChanged, never an answer mixing two versions; the
// file check reports it too.
func TestS3ReplacedWhileServed(t *testing.T) {
	bucket := s3test.Bucket(t)
	name := "hnsw_flat_large"
	f, err := testfixtures.Load(fixtures, name)
	require.NoError(t, err)
	u := s3test.PutFile(t, bucket, name+".faiss", fixture(name+".faiss"))
	// Small blocks and cache: queries keep fetching.
	x, _, err := engine.Open(engine.Spec{Path: u, Mode: "memory_efficient", CacheBytes: 64 << 10, CacheBlock: 4096,
		Semantics: "faiss-1.7.3", Kernel: "exact"})
	require.NoError(t, err)
	defer x.Close()
	qp, err := x.Plan(engine.Request{K: 10})
	require.NoError(t, err)
	var sc engine.Scratch
	before := make([][]engine.Hit, len(f.Queries))
	for i, q := range f.Queries {
		hits, _, err := x.Query(&qp, q, &sc)
		require.NoError(t, err)
		before[i] = slices.Clone(hits) // hits live in the scratch
	}

	other, err := os.ReadFile(fixture(name + ".faiss"))
	require.NoError(t, err)
	for i := len(other) - 700000; i < len(other); i++ { // other vectors, same layout
		other[i] ^= 0x5a
	}
	s3test.Put(t, bucket, name+".faiss", other)
	failed := 0
	for i, q := range f.Queries {
		hits, _, err := x.Query(&qp, q, &sc)
		if err != nil {
			require.ErrorIs(t, err, partial.ErrFileChanged)
			failed++
			continue
		}
		assert.Equal(t, before[i], hits, "an answer is the first version's") // from cached blocks only
	}
	assert.Positive(t, failed, "queries reading uncached bytes see the replacement")
	require.ErrorIs(t, x.CheckFile(), partial.ErrFileChanged)
	_, _, err = x.Query(&qp, f.Queries[0], &sc)
	require.ErrorIs(t, err, partial.ErrFileChanged, "sticky: even a query served from the cache")
}

// TestS3OpenOnce: Prepare's probe and Plan.Open share one object and one
// parse, so opening an s3:// index costs its first GET (the head, size and
// ETag), the arrays beyond the head, the storage header and the search's
// first lists: at most 4 requests, where a second object and parse cost as
// many again. A plan opened twice opens the object again.
func TestS3OpenOnce(t *testing.T) {
	bucket := s3test.Bucket(t)
	for _, name := range []string{"hnsw_flat_large", "idmap_hnsw", "bin_idmap_hnsw"} {
		u := s3test.PutFile(t, bucket, "once/"+name+".faiss", fixture(name+".faiss"))
		// (Under a memory budget the open also pins lists and samples
		// them: more reads, of the index's own storage.)
		for _, spec := range []engine.Spec{{Path: u}, {Path: u, CacheDir: engine.NewCacheDir(t.TempDir(), 0)}} {
			before := s3.ReadMetrics()
			p, err := engine.Prepare(spec)
			require.NoError(t, err)
			x, err := p.Open()
			require.NoError(t, err, "%s %+v", name, spec)
			after := s3.ReadMetrics()
			n := after.GETs + after.HEADs - before.GETs - before.HEADs
			assert.LessOrEqual(t, n, int64(4), "%s %+v", name, spec)
			assert.Positive(t, n)
			qp, err := x.Plan(engine.Request{K: 5})
			require.NoError(t, err)
			vec := make([]float64, x.Dim())
			_, _, err = x.Query(&qp, vec, nil)
			require.NoError(t, err)
			x.Close()

			again, err := p.Open() // the object was the first index's: opened anew
			require.NoError(t, err)
			_, _, err = again.Query(&qp, vec, nil)
			require.NoError(t, err)
			again.Close()
		}
	}
}

// TestS3CacheCharged: an object read through a block cache is charged the
// cache, whichever file backend is named (mmap and pread mean a block
// cache over an object), and named direct with no budget, nothing; a
// malformed s3:// path is a bad spec naming the path, before any request.
func TestS3CacheCharged(t *testing.T) {
	bucket := s3test.Bucket(t)
	u := s3test.PutFile(t, bucket, "charge/x.faiss", fixture("hnsw_flat_large.faiss"))
	def, err := engine.Prepare(engine.Spec{Path: u})
	require.NoError(t, err)
	for _, b := range []engine.Backend{"mmap", "pread", "s3"} {
		p, err := engine.Prepare(engine.Spec{Path: u, Backend: b})
		require.NoError(t, err, b)
		assert.Equal(t, def.NeedBytes(), p.NeedBytes(), b)
		x, err := p.Open()
		require.NoError(t, err, b)
		st, _ := x.StorageStats()
		x.Close()
		assert.Positive(t, st.ResidentBytes, "%s: a block cache", b)
	}
	d, err := engine.Prepare(engine.Spec{Path: u, Backend: "direct"})
	require.NoError(t, err)
	assert.Less(t, d.NeedBytes(), def.NeedBytes(), "direct: no cache")

	before := s3.ReadMetrics()
	_, err = engine.Prepare(engine.Spec{Path: "s3://ab/x.faiss"})
	require.ErrorIs(t, err, engine.ErrBadSpec)
	var fe *engine.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "path", fe.Field)
	assert.Contains(t, err.Error(), `bucket name "ab"`)
	assert.Equal(t, before.GETs, s3.ReadMetrics().GETs, "no request")
}

// TestRerankFromObject: rerank vectors in an s3:// object other than the
// index are read from it with strategy batch, whatever strategy is named,
// and rescore as the local file does; OpenVectors (the CLI's door) opens
// an object the same way.
func TestRerankFromObject(t *testing.T) {
	bucket := s3test.Bucket(t)
	idx := fixture("hnsw_flat_l2.faiss")
	u := s3test.PutFile(t, bucket, "vec/hnsw_flat_l2.faiss", idx)
	f, err := testfixtures.Load(fixtures, "hnsw_flat_l2")
	require.NoError(t, err)
	lx, _, err := engine.Open(engine.Spec{Path: idx, Rerank: &engine.RerankSpec{Path: idx, Strategy: "pread"}})
	require.NoError(t, err)
	defer lx.Close()
	rx, _, err := engine.Open(engine.Spec{Path: idx, Rerank: &engine.RerankSpec{Path: u, Strategy: "direct"}})
	require.NoError(t, err)
	defer rx.Close()
	assert.Equal(t, rerank.StrategyBatch, rx.RerankStrategy())
	qp, err := rx.Plan(engine.Request{K: 5, Rescore: &engine.Rescore{Oversample: 4}})
	require.NoError(t, err)
	for qi, q := range f.Queries {
		want, _, err := lx.Query(&qp, q, nil)
		require.NoError(t, err)
		got, prof, err := rx.Query(&qp, q, nil)
		require.NoError(t, err)
		require.NotNil(t, prof.Rerank)
		assert.Equal(t, 1, prof.Rerank.Batches, "query %d: one batch of GETs", qi)
		assert.Equal(t, want, got, "query %d", qi)
	}

	s, err := engine.OpenVectors(nil, u, "mmap", 0)
	require.NoError(t, err)
	assert.Equal(t, rerank.StrategyBatch, s.Strategy())
	require.NoError(t, s.Check(rx.Dim(), rx.NTotal()))
	require.NoError(t, s.Close())
}
