package engine_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// TestS3DiskCacheRestart: an index served from S3 with a cache directory
// answers FAISS's results; opened again on the same directory (a restart)
// it answers the same with no GET beyond the open's, every block a disk
// hit, and its profiles and storage stats say so.
func TestS3DiskCacheRestart(t *testing.T) {
	bucket := s3test.Bucket(t)
	name := "hnsw_flat_large"
	f, err := testfixtures.Load(fixtures, name)
	require.NoError(t, err)
	u := s3test.PutFile(t, bucket, name+".faiss", fixture(name+".faiss"))
	spec := engine.Spec{Path: u, Mode: "memory_efficient", CacheDir: engine.NewCacheDir(t.TempDir(), 0), Semantics: "faiss-1.7.3", Kernel: "exact"}

	// run answers every run's queries, checked against FAISS's ids and
	// distances; it returns the hits and the I/O the profiles counted.
	run := func(x *engine.Index) (all [][]engine.Hit, io engine.Profile) {
		var sc engine.Scratch
		for ri, r := range f.Runs {
			req := engine.Request{K: r.K, Filter: r.AllowIDs}
			if r.EfSearch != nil {
				req.EfSearch, req.EfSearchSet = *r.EfSearch, true
			}
			qp, err := x.Plan(req)
			require.NoError(t, err)
			for qi, q := range f.Queries {
				hits, prof, err := x.Query(&qp, q, &sc)
				require.NoError(t, err)
				n := 0
				for j, id := range r.IDs[qi] {
					if id < 0 {
						continue
					}
					require.Less(t, n, len(hits))
					assert.Equal(t, id, hits[n].ID, "run %d query %d rank %d", ri, qi, j)
					assert.Equal(t, float32(r.Dist[qi][j]), float32(hits[n].Distance), "run %d query %d rank %d", ri, qi, j)
					n++
				}
				require.Len(t, hits, n)
				all = append(all, slices.Clone(hits))
				io.IO.Add(&prof.IO)
			}
		}
		return all, io
	}

	x, _, err := engine.Open(spec)
	require.NoError(t, err)
	cold, coldIO := run(x)
	st, ok := x.StorageStats()
	require.True(t, ok)
	require.NotNil(t, st.Tiers)
	assert.Positive(t, st.Tiers.ColdReads, "the first open fetched from S3")
	assert.Positive(t, st.Tiers.DiskUsedBytes)
	assert.Equal(t, coldIO.IO.ColdReads+coldIO.IO.DiskHits, coldIO.IO.CacheMisses, "each memory miss went to disk or S3")
	x.Close()

	x, _, err = engine.Open(spec)
	require.NoError(t, err)
	defer x.Close()
	st, _ = x.StorageStats()
	opened := st.ReadCalls
	assert.Equal(t, int64(1), opened, "the open's one GET (size and ETag); headers from disk")
	warm, warmIO := run(x)
	assert.Equal(t, cold, warm, "the same answers from the disk cache")
	st, _ = x.StorageStats()
	assert.Equal(t, opened, st.ReadCalls, "no GET for the queries")
	assert.Zero(t, st.Tiers.ColdReads)
	assert.Positive(t, st.Tiers.DiskHits)
	assert.Positive(t, st.Tiers.MemoryHits)
	assert.Zero(t, warmIO.IO.ColdReads)
	assert.Equal(t, warmIO.IO.CacheMisses, warmIO.IO.DiskHits, "every memory miss of a query was a disk hit")
}
