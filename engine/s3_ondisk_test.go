package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

func loadOnDisk(t *testing.T, name string) (string, onDiskFixture) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "ondisk", name+".json"))
	require.NoError(t, err)
	var fx onDiskFixture
	require.NoError(t, json.Unmarshal(raw, &fx))
	return filepath.Join("..", "testdata", "ondisk", name+".faiss"), fx
}

// TestS3OnDiskMatchesLocal: mode on_disk over s3://BUCKET/KEY, at 4x and
// 32x, without and with a memory budget (and a disk cache), returns hit for hit what on_disk
// over the same local file returns with the same guide parameters, and
// FAISS's HNSW recall@10 against FAISS's exact search (less the slack
// TestOnDiskRecall allows). The guide is built from the object, kept in
// the guide directory under a name of its own, and loaded by the next
// open; reranking reads the object (strategy batch).
func TestS3OnDiskMatchesLocal(t *testing.T) {
	bucket := s3test.Bucket(t)
	for _, name := range []string{"clustered_l2", "clustered_ip"} {
		local, fx := loadOnDisk(t, name)
		u := s3test.PutFile(t, bucket, "ondisk/"+name+".faiss", local)
		for _, level := range []string{"4x", "32x"} {
			for _, budget := range []int64{0, 8 << 20} {
				ldir, rdir := t.TempDir(), t.TempDir()
				lspec := engine.Spec{Path: local, Mode: engine.ModeOnDisk, Compression: level, GuideDir: ldir, MemoryBudget: budget}
				rspec := lspec
				rspec.Path, rspec.GuideDir = u, rdir
				if budget > 0 { // and through a disk cache
					rspec.CacheDir = engine.NewCacheDir(t.TempDir(), 0)
				}
				lx, _, err := engine.Open(lspec)
				require.NoError(t, err)
				rx, plan, err := engine.Open(rspec)
				require.NoError(t, err, "%s %s budget %d", name, level, budget)
				gi, ok := rx.Guide()
				require.True(t, ok)
				assert.False(t, gi.Loaded, "the first open builds the guide")
				assert.Empty(t, gi.NotSaved)
				assert.Equal(t, rdir, filepath.Dir(gi.Path))
				assert.Equal(t, engine.GuidePath(rdir, u, level), gi.Path)
				assert.FileExists(t, gi.Path)
				assert.True(t, strings.HasPrefix(filepath.Base(gi.Path), name+".faiss."), gi.Path)
				assert.Equal(t, rerank.StrategyBatch, rx.RerankStrategy())
				assert.Equal(t, rerank.StrategyBatch, plan.Spec().Rerank.Strategy)
				lgi, _ := lx.Guide()
				assert.Equal(t, lgi.Bytes, gi.Bytes)

				var rescore *engine.Rescore
				slack := 0.01
				if level == "32x" {
					rescore, slack = &engine.Rescore{Oversample: 30}, 0.07 // see TestOnDiskRecall
				}
				for _, h := range fx.HNSW {
					r := engine.Request{K: 10, EfSearch: h.EfSearch, EfSearchSet: true, Rescore: rescore}
					lqp, err := lx.Plan(r)
					require.NoError(t, err)
					rqp, err := rx.Plan(r)
					require.NoError(t, err)
					var recall float64
					for qi, q := range fx.Queries {
						lh, _, err := lx.Query(&lqp, q, nil)
						require.NoError(t, err)
						rh, prof, err := rx.Query(&rqp, q, nil)
						require.NoError(t, err)
						require.NotNil(t, prof.Rerank)
						require.Equal(t, lh, rh, "%s %s budget %d ef %d query %d: as the local file", name, level, budget, h.EfSearch, qi)
						recall += recallAt(rh, fx.Exact.IDs[qi])
					}
					recall /= float64(len(fx.Queries))
					assert.GreaterOrEqual(t, recall, h.Recall-slack, "%s %s ef %d", name, level, h.EfSearch)
				}
				require.NoError(t, rx.CheckFile())
				rx.Close()
				lx.Close()

				again, _, err := engine.Open(rspec)
				require.NoError(t, err)
				gi, _ = again.Guide()
				assert.True(t, gi.Loaded, "a second open loads the guide file")
				again.Close()
			}
		}
	}
}

// TestS3OnDiskOneRound: with the lists pinned and the guide in memory, an
// on_disk query over S3 reads nothing for the walk and reranks in one
// batch: every GET the query makes is the rerank's, sent together.
func TestS3OnDiskOneRound(t *testing.T) {
	bucket := s3test.Bucket(t)
	local, fx := loadOnDisk(t, "clustered_l2")
	u := s3test.PutFile(t, bucket, "clustered_l2.faiss", local)
	x, _, err := engine.Open(engine.Spec{Path: u, Mode: engine.ModeOnDisk, Compression: "4x", GuideDir: t.TempDir(), MemoryBudget: 8 << 20})
	require.NoError(t, err)
	defer x.Close()
	require.True(t, x.AllListsPinned(), "the budget pins every list")
	qp, err := x.Plan(engine.Request{K: 10})
	require.NoError(t, err)
	for qi, q := range fx.Queries {
		before, ok := x.StorageStats()
		require.True(t, ok)
		_, prof, err := x.Query(&qp, q, nil)
		require.NoError(t, err)
		after, _ := x.StorageStats()
		assert.Zero(t, prof.Reads, "query %d: the walk reads nothing", qi)
		assert.Zero(t, prof.Batches, "query %d", qi)
		require.NotNil(t, prof.Rerank)
		assert.Equal(t, 1, prof.Rerank.Batches, "query %d: one round of rerank reads", qi)
		assert.Positive(t, prof.Rerank.Reads, "query %d", qi)
		assert.Equal(t, int64(prof.Rerank.Reads), after.ReadCalls-before.ReadCalls, "query %d: every GET is the rerank batch's", qi)
	}
}

// TestS3OnDiskGuide: a replaced object's guide is stale (rebuilt, the
// reason reported, never used); without a guide directory an s3:// index's
// guide goes to the caller's default (Spec.RemoteGuideDir: the command
// line's user cache directory, TestDefaultRemoteGuideDir), and without one
// of those the load is refused naming guide_dir; quantize builds the guide
// an open then loads.
func TestS3OnDiskGuide(t *testing.T) {
	bucket := s3test.Bucket(t)
	local, fx := loadOnDisk(t, "clustered_l2")
	u := s3test.PutFile(t, bucket, "g/clustered_l2.faiss", local)
	dir := t.TempDir()
	spec := engine.Spec{Path: u, Mode: engine.ModeOnDisk, Compression: "4x", GuideDir: dir}
	open := func() (engine.GuideInfo, []engine.Hit) {
		x, _, err := engine.Open(spec)
		require.NoError(t, err)
		defer x.Close()
		gi, _ := x.Guide()
		qp, err := x.Plan(engine.Request{K: 10})
		require.NoError(t, err)
		hits, _, err := x.Query(&qp, fx.Queries[0], nil)
		require.NoError(t, err)
		return gi, slices.Clone(hits)
	}
	gi, first := open()
	require.False(t, gi.Loaded)
	gi, _ = open()
	require.True(t, gi.Loaded)

	// Another version of the object (one vector's byte changed): a new
	// ETag, so the guide is stale, rebuilt and never used.
	b, err := os.ReadFile(local)
	require.NoError(t, err)
	changed := slices.Clone(b)
	changed[len(changed)-1000] ^= 1
	s3test.Put(t, bucket, "g/clustered_l2.faiss", changed)
	gi, _ = open()
	assert.False(t, gi.Loaded, "a replaced object's guide is rebuilt")
	assert.Contains(t, gi.Rebuilt, "stale")
	// The first version back: the guide on disk is the other version's.
	s3test.Put(t, bucket, "g/clustered_l2.faiss", b)
	gi, again := open()
	assert.False(t, gi.Loaded)
	assert.Contains(t, gi.Rebuilt, "stale")
	assert.Equal(t, first, again)
	gi, _ = open()
	assert.True(t, gi.Loaded, "the rebuilt guide is kept")

	// Default directory: the caller's.
	cache := filepath.Join(t.TempDir(), "faiss-sidecar", "guides")
	def := spec
	def.GuideDir, def.RemoteGuideDir = "", cache
	x, plan, err := engine.Open(def)
	require.NoError(t, err)
	gd, _ := x.Guide()
	x.Close()
	assert.Equal(t, cache, filepath.Dir(gd.Path))
	assert.Equal(t, cache, plan.Spec().GuideDir)
	assert.FileExists(t, gd.Path)
	def.RemoteGuideDir = ""
	_, _, err = engine.Open(def)
	require.ErrorIs(t, err, engine.ErrBadSpec)
	var fe *engine.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "guide_dir", fe.Field)
	assert.Contains(t, err.Error(), u)

	// quantize ahead of time, then an open loads it.
	qdir := t.TempDir()
	qi, err := engine.Quantize(engine.Spec{Path: u, Compression: "32x", GuideDir: qdir}, "")
	require.NoError(t, err)
	assert.Equal(t, engine.GuidePath(qdir, u, "32x"), qi.Path)
	x, _, err = engine.Open(engine.Spec{Path: u, Mode: engine.ModeOnDisk, Compression: "32x", GuideDir: qdir})
	require.NoError(t, err)
	gq, _ := x.Guide()
	assert.True(t, gq.Loaded, "the guide quantize built")
	x.Close()
}

// TestS3OnDiskReplacedWhileServed: an object replaced while on_disk serves
// it fails the rerank with ErrFileChanged, never mixing versions.
func TestS3OnDiskReplacedWhileServed(t *testing.T) {
	bucket := s3test.Bucket(t)
	local, fx := loadOnDisk(t, "clustered_l2")
	u := s3test.PutFile(t, bucket, "r.faiss", local)
	x, _, err := engine.Open(engine.Spec{Path: u, Mode: engine.ModeOnDisk, Compression: "4x", GuideDir: t.TempDir()})
	require.NoError(t, err)
	defer x.Close()
	qp, err := x.Plan(engine.Request{K: 10})
	require.NoError(t, err)
	_, _, err = x.Query(&qp, fx.Queries[0], nil)
	require.NoError(t, err)
	b, err := os.ReadFile(local)
	require.NoError(t, err)
	for i := len(b) - 100000; i < len(b); i++ {
		b[i] ^= 0x5a
	}
	s3test.Put(t, bucket, "r.faiss", b)
	_, _, err = x.Query(&qp, fx.Queries[1], nil)
	require.ErrorIs(t, err, partial.ErrFileChanged)
	require.ErrorIs(t, x.CheckFile(), partial.ErrFileChanged)
}
