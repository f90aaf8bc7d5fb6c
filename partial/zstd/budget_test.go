//go:build cgo

package zstd_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// writeZstd compresses data into a seekable zstd file of frame-byte frames.
func writeZstd(t *testing.T, data []byte, frame int) string {
	t.Helper()
	var buf bytes.Buffer
	_, err := zstd.CompressSeekable(&buf, bytes.NewReader(data), frame, 3, nil)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "data.zst")
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	return p
}

// TestZstdCacheBudgetFor: a tiny zstd file is charged its decompressed
// size, not the 64 MiB default, and a cache of exactly that budget keeps
// every frame: a second pass over the file decompresses nothing.
func TestZstdCacheBudgetFor(t *testing.T) {
	const size = 70000 // two 64 KiB frames, the second short
	assert.Equal(t, int64(size), storage.Options{}.CacheBudgetFor("zstd", size))
	assert.Equal(t, int64(size), storage.Options{CacheBytes: 1 << 30}.CacheBudgetFor("zstd", size))
	assert.Equal(t, int64(5000), storage.Options{CacheBytes: 5000}.CacheBudgetFor("zstd", size), "a smaller budget stays")
	assert.Equal(t, int64(storage.DefaultCacheBytes), storage.Options{}.CacheBudgetFor("zstd", 1<<40), "a large file keeps the default")
	shared := blockcache.New(1 << 20)
	assert.Equal(t, int64(storage.DefaultCacheBytes), storage.Options{Cache: shared}.CacheBudgetFor("zstd", size),
		"a shared cache is charged elsewhere")
	// pread and direct: capped where the cache mirrors the file.
	pread := storage.Options{}.CacheBudgetFor("pread", size)
	assert.GreaterOrEqual(t, pread, blockcache.MirrorBudget(size), "pread budget: the cache mirrors the file")
	assert.Less(t, pread, int64(2*size))
	assert.Zero(t, storage.Options{}.CacheBudgetFor("mmap", size))

	data := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.IntN(8))
	}
	path := writeZstd(t, data, 64<<10)
	budget := storage.Options{}.CacheBudgetFor("zstd", size)
	s, err := storage.Open(context.Background(), path, storage.Options{Backend: "zstd", CacheBytes: budget})
	require.NoError(t, err)
	defer s.Close()
	z := s.(*zstd.File)
	require.Equal(t, 2, z.Frames())
	require.Equal(t, int64(size), s.Size())
	got := make([]byte, 1000)
	for pass := range 2 {
		for off := int64(0); off < size; off += int64(len(got)) {
			n, err := s.ReadAtContext(context.Background(), got[:min(int64(len(got)), size-off)], off, nil)
			require.NoError(t, err)
			require.Equal(t, data[off:off+int64(n)], got[:n], "pass %d offset %d", pass, off)
		}
	}
	st := z.Stats()
	assert.Equal(t, int64(2), st.CacheMisses, "each frame decompressed once")
	assert.Zero(t, st.CacheEvictions)
	assert.LessOrEqual(t, st.ResidentBytes, budget, "the cache holds no more than it was charged")
}

// TestZstdTruncated: a seekable file cut short is recognised as zstd (it
// starts with a frame) and opening it as zstd says it is truncated; a plain
// file says it is not compressed.
func TestZstdTruncated(t *testing.T) {
	data := bytes.Repeat([]byte("faiss-sidecar "), 20000)
	full, err := os.ReadFile(writeZstd(t, data, 8192))
	require.NoError(t, err)
	dir := t.TempDir()
	trunc := filepath.Join(dir, "trunc.zst")
	require.NoError(t, os.WriteFile(trunc, full[:len(full)/2], 0o644))
	plain := filepath.Join(dir, "plain.bin")
	require.NoError(t, os.WriteFile(plain, data, 0o644))
	tiny := filepath.Join(dir, "tiny")
	require.NoError(t, os.WriteFile(tiny, []byte{1, 2}, 0o644))

	_, err = storage.Open(context.Background(), trunc, storage.Options{Backend: "zstd"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), trunc+" starts with a zstd frame but has no seek table at its end: it is truncated")
	_, err = storage.Open(context.Background(), plain, storage.Options{Backend: "zstd"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), plain+" is not zstd-compressed")

	for path, want := range map[string]bool{trunc: true, plain: false, tiny: false} {
		ok, err := zstd.IsCompressed(path)
		require.NoError(t, err)
		assert.Equal(t, want, ok, path)
	}
	// The end of a seek table whose frames are not there is no seek table.
	tableOnly := filepath.Join(dir, "table")
	require.NoError(t, os.WriteFile(tableOnly, append(bytes.Repeat([]byte{7}, 10), full[len(full)-200:]...), 0o644))
	ok, err := zstd.IsCompressed(tableOnly)
	require.NoError(t, err)
	assert.False(t, ok, "a table that does not match its frames is not a seek table")
	ok, err = zstd.IsCompressed(filepath.Join(dir, "missing"))
	assert.Error(t, err)
	assert.False(t, ok)

	assert.True(t, zstd.HasMagic([]byte{0x28, 0xb5, 0x2f, 0xfd}))
	assert.True(t, zstd.HasMagic([]byte{0x5e, 0x2a, 0x4d, 0x18, 0}))
	assert.True(t, zstd.HasMagic([]byte{0x50, 0x2a, 0x4d, 0x18}))
	assert.False(t, zstd.HasMagic([]byte{0x49, 0x78, 0x4d, 0x70})) // IxMp
	assert.False(t, zstd.HasMagic([]byte{0x28, 0xb5}))
}
