package storage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

func opener(o storage.Options) partialtest.Opener {
	return func(t *testing.T, path string) partial.Storage {
		t.Helper()
		s, err := storage.Open(context.Background(), path, o)
		require.NoError(t, err)
		return s
	}
}

func compress(frame int) partialtest.Prepare {
	return func(t *testing.T, plain string) string {
		t.Helper()
		in, err := os.Open(plain)
		require.NoError(t, err)
		defer in.Close()
		out := filepath.Join(t.TempDir(), "data.zst")
		f, err := os.Create(out)
		require.NoError(t, err)
		_, err = zstd.CompressSeekable(f, in, frame, 3, nil)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		return out
	}
}

func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) { partialtest.Run(t, opener(storage.Options{Backend: "memory"}), nil) })
	t.Run("memory aligned", func(t *testing.T) {
		partialtest.Run(t, opener(storage.Options{Backend: "memory", AlignOffset: 4099}), nil)
	})
	t.Run("mmap", func(t *testing.T) { partialtest.Run(t, opener(storage.Options{Backend: "mmap"}), nil) })
	t.Run("pread", func(t *testing.T) { partialtest.Run(t, opener(storage.Options{Backend: "pread"}), nil) })
	t.Run("pread aligned", func(t *testing.T) {
		partialtest.Run(t, opener(storage.Options{Backend: "pread", AlignOffset: 4099}), nil)
	})
	t.Run("pread aligned tiny cache", func(t *testing.T) { // no mirror below the file's size: the offset is moot
		partialtest.Run(t, opener(storage.Options{Backend: "pread", AlignOffset: 58, CacheBytes: 128 << 10}), nil)
	})
	t.Run("pread tiny cache", func(t *testing.T) {
		partialtest.Run(t, opener(storage.Options{Backend: "pread", CacheBytes: 64 << 10, BlockSize: 512}), nil)
	})
	t.Run("direct", func(t *testing.T) { partialtest.Run(t, opener(storage.Options{Backend: "direct"}), nil) })
	t.Run("direct cached", func(t *testing.T) {
		partialtest.Run(t, opener(storage.Options{Backend: "direct", CacheBytes: 1 << 20}), nil)
	})
	if !zstd.Supported {
		t.Run("zstd unsupported", func(t *testing.T) {
			_, err := zstd.Open("x.zst", nil, 1<<20)
			require.ErrorIs(t, err, errors.ErrUnsupported, "without cgo")
		})
		return
	}
	t.Run("zstd", func(t *testing.T) { partialtest.Run(t, opener(storage.Options{Backend: "zstd"}), compress(4096)) })
	t.Run("zstd auto-detected", func(t *testing.T) {
		partialtest.Run(t, opener(storage.Options{CacheBytes: 32 << 10}), compress(1000))
	})
}

func TestUnknownBackend(t *testing.T) {
	_, err := storage.Open(context.Background(), "x", storage.Options{Backend: "tape"})
	require.ErrorContains(t, err, `unknown backend "tape"`)
}

// TestDirectParallelOption: the parallelism is fixed at open; a negative
// one is refused as a bad option.
func TestDirectParallelOption(t *testing.T) {
	path, _ := partialtest.PatternFile(t, 8192)
	for parallel, want := range map[int]int{0: partial.DefaultDirectParallel, 7: 7} {
		d, err := partial.OpenDirect(path, parallel)
		require.NoError(t, err)
		require.Equal(t, want, d.Parallel())
		require.NoError(t, d.Close())
	}
	_, err := partial.OpenDirect(path, -1)
	require.ErrorIs(t, err, partial.ErrBadOption)
	s, err := storage.Open(context.Background(), path, storage.Options{Backend: "direct", DirectParallel: 5})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, 5, s.(*partial.Direct).Parallel())
}

// TestAutoBackend: Open's "" and the rule it names agree: pread for a
// plain file.
func TestAutoBackend(t *testing.T) {
	path, _ := partialtest.PatternFile(t, 8192)
	b, err := storage.AutoBackend(path, storage.DefaultPlainBackend)
	require.NoError(t, err)
	require.Equal(t, storage.BackendPread, b)
	b, err = storage.AutoBackend(path, "mmap")
	require.NoError(t, err)
	require.Equal(t, storage.BackendMmap, b)
	s, err := storage.Open(context.Background(), path, storage.Options{})
	require.NoError(t, err)
	defer s.Close()
	_, ok := s.(*blockcache.Cached)
	require.True(t, ok, "Open's default on a plain file is pread (a Cached), got %T", s)
	_, err = storage.AutoBackend(filepath.Join(t.TempDir(), "missing"), "mmap")
	require.Error(t, err)
}
