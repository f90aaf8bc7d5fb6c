package storage_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// TestConformanceS3DiskCache: an s3:// path with a cache directory, behind
// a block cache and (named direct, no budget) alone.
func TestConformanceS3DiskCache(t *testing.T) {
	s3test.Endpoint(t)
	t.Run("block cache, disk cache", func(t *testing.T) {
		partialtest.Run(t, s3Opener(t, storage.Options{CacheDir: diskcache.NewDir(t.TempDir(), 0), CacheBytes: 64 << 10, BlockSize: 4096}), nil)
	})
	t.Run("disk cache alone", func(t *testing.T) {
		partialtest.Run(t, s3Opener(t, storage.Options{Backend: "direct", CacheDir: diskcache.NewDir(t.TempDir(), 256<<10)}), nil)
	})
}

// TestS3DiskCacheStack: Open stacks block cache → disk cache → object,
// with disk blocks of at least the s3 block size; a second open of the
// object reads its blocks from disk, not the server.
func TestS3DiskCacheStack(t *testing.T) {
	path, data := partialtest.PatternFile(t, 300<<10)
	bucket := s3test.Bucket(t)
	u := s3test.PutFile(t, bucket, "p.bin", path)
	dir := t.TempDir()
	o := storage.Options{CacheDir: diskcache.NewDir(dir, 0), S3: s3.NewClient(s3.Options{})}
	s, err := storage.Open(context.Background(), u, o)
	require.NoError(t, err)
	c, ok := s.(*blockcache.Cached)
	require.True(t, ok, "%T", s)
	dc, ok := c.Inner().(*diskcache.Cache)
	require.True(t, ok, "%T", c.Inner())
	assert.Equal(t, int64(4096), c.BlockSize(), "memory blocks of 4 KiB over a disk cache")
	assert.Equal(t, int64(s3.DefaultBlockSize), dc.BlockSize(), "disk blocks of the s3 block size")
	obj := dc.Inner().(*s3.Object)
	p := make([]byte, len(data))
	_, err = s.ReadAtContext(context.Background(), p, 0, nil)
	require.NoError(t, err)
	require.Equal(t, data, p)
	gets := obj.Requests().GETs
	st := c.Stats()
	require.NotNil(t, st.Tiers)
	assert.Equal(t, st.ReadCalls, gets)
	assert.Equal(t, int64(len(data)), st.Tiers.ColdBytes)
	require.NoError(t, s.Close())

	s, err = storage.Open(context.Background(), u, o)
	require.NoError(t, err)
	defer s.Close()
	obj = s.(*blockcache.Cached).Inner().(*diskcache.Cache).Inner().(*s3.Object)
	clear(p)
	_, err = s.ReadAtContext(context.Background(), p, 0, nil)
	require.NoError(t, err)
	require.Equal(t, data, p)
	assert.Equal(t, int64(1), obj.Requests().GETs, "the open's GET only")
	st = s.(partial.StatsReporter).Stats()
	assert.Zero(t, st.Tiers.ColdReads)
	assert.Equal(t, int64(5), st.Tiers.DiskHits, "a read of the whole object bypasses memory: its 5 disk blocks read once")
	assert.Equal(t, int64(len(data)), st.Tiers.DiskBytes)
	small := make([]byte, 100)
	for _, off := range []int64{0, 70000, 70100} {
		_, err = s.ReadAtContext(context.Background(), small, off, nil)
		require.NoError(t, err)
		require.Equal(t, data[off:off+100], small)
	}
	st = s.(partial.StatsReporter).Stats()
	assert.Equal(t, int64(7), st.Tiers.DiskHits, "a memory miss is a disk hit; the third read hit memory")
	assert.Equal(t, int64(len(data)+2*4096), st.Tiers.DiskBytes, "each miss reading its 4 KiB of the disk block")
	assert.Equal(t, int64(1), obj.Requests().GETs)

	_, err = storage.Open(context.Background(), u, storage.Options{CacheDir: diskcache.NewDir(dir, -1)})
	require.ErrorIs(t, err, partial.ErrBadOption)
}
