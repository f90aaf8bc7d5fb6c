package storage_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// s3Opener uploads each file the suite writes (once) and opens its s3://
// path with storage.Open.
func s3Opener(t *testing.T, o storage.Options) partialtest.Opener {
	bucket := s3test.Bucket(t)
	if o.S3 == nil {
		o.S3 = s3.NewClient(s3.Options{}) // as a program passes its own
	}
	var mu sync.Mutex
	urls := map[string]string{}
	return func(t *testing.T, path string) partial.Storage {
		t.Helper()
		mu.Lock()
		u, ok := urls[path]
		if !ok {
			u = s3test.PutFile(t, bucket, fmt.Sprintf("o%d/%s", len(urls), filepath.Base(path)), path)
			urls[path] = u
		}
		mu.Unlock()
		s, err := storage.Open(context.Background(), u, o)
		require.NoError(t, err)
		return s
	}
}

// TestConformanceS3: an s3:// path through Open: auto (the s3 backend
// behind a block cache), a named file backend (the same), a tiny cache,
// and memory (downloaded whole).
func TestConformanceS3(t *testing.T) {
	s3test.Endpoint(t)
	t.Run("auto", func(t *testing.T) { partialtest.Run(t, s3Opener(t, storage.Options{}), nil) })
	t.Run("s3 tiny cache", func(t *testing.T) {
		partialtest.Run(t, s3Opener(t, storage.Options{Backend: "s3", CacheBytes: 64 << 10, BlockSize: 4096}), nil)
	})
	t.Run("pread named", func(t *testing.T) { partialtest.Run(t, s3Opener(t, storage.Options{Backend: "pread"}), nil) })
	t.Run("direct named, no cache", func(t *testing.T) {
		partialtest.Run(t, s3Opener(t, storage.Options{Backend: "direct"}), nil)
	})
	t.Run("memory", func(t *testing.T) {
		partialtest.Run(t, s3Opener(t, storage.Options{Backend: "memory", AlignOffset: 4099}), nil)
	})
}

func TestS3Backend(t *testing.T) {
	b, err := storage.AutoBackend("s3://bucket/key", storage.DefaultPlainBackend)
	require.NoError(t, err)
	require.Equal(t, storage.BackendS3, b)
	_, err = storage.ParseBackend("s3")
	require.NoError(t, err)
	path, _ := partialtest.PatternFile(t, 8192)
	_, err = storage.Open(context.Background(), path, storage.Options{Backend: "s3"})
	require.ErrorIs(t, err, partial.ErrBadOption)
	require.ErrorContains(t, err, "s3://BUCKET/KEY")
	_, err = storage.Open(context.Background(), "s3://bucket/key", storage.Options{Backend: "zstd"})
	require.ErrorIs(t, err, partial.ErrBadOption)
	_, err = storage.Open(context.Background(), "s3://bucket/", storage.Options{})
	require.ErrorIs(t, err, partial.ErrBadOption)

	bucket := s3test.Bucket(t)
	u := s3test.PutFile(t, bucket, "p.bin", path)
	s, err := storage.Open(context.Background(), u, storage.Options{})
	require.NoError(t, err)
	defer s.Close()
	c, ok := s.(*blockcache.Cached)
	require.True(t, ok, "%T", s)
	require.Equal(t, int64(s3.DefaultBlockSize), c.BlockSize())
	_, ok = c.Inner().(*s3.Object)
	require.True(t, ok, "%T", c.Inner())
	d, err := storage.Open(context.Background(), u, storage.Options{Backend: "direct"})
	require.NoError(t, err)
	defer d.Close()
	_, ok = d.(*s3.Object)
	require.True(t, ok, "direct without a cache budget: the object alone, got %T", d)
	require.Equal(t, blockcache.MirrorBudget(8192)+2*s3.DefaultBlockSize, storage.Options{}.CacheBudgetFor("s3", 8192),
		"a private cache capped at the whole file, in s3-sized blocks")
}
