//go:build cgo

package zstd_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	seekable "github.com/SaveTheRbtz/zstd-seekable-format-go/pkg"
	kzstd "github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// TestZstdOtherWriter reads a file written by an independent implementation
// of the seekable format (SaveTheRbtz/zstd-seekable-format-go with
// klauspost's encoder): frames of varying sizes, checksummed seek-table
// entries. It must read back exactly, and be recognised without --backend.
func TestZstdOtherWriter(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	var want []byte
	path := filepath.Join(t.TempDir(), "other.zst")
	f, err := os.Create(path)
	require.NoError(t, err)
	enc, err := kzstd.NewWriter(nil)
	require.NoError(t, err)
	w, err := seekable.NewWriter(f, enc)
	require.NoError(t, err)
	for _, n := range []int{1, 4096, 70000, 3, 12345, 65536, 999} {
		chunk := make([]byte, n)
		for i := range chunk {
			chunk[i] = byte(r.IntN(16)) // compressible
		}
		_, err := w.Write(chunk)
		require.NoError(t, err)
		want = append(want, chunk...)
	}
	require.NoError(t, w.Close())
	enc.Close()
	require.NoError(t, f.Close())

	s, err := storage.Open(context.Background(), path, storage.Options{}) // auto-detected by its seek table
	require.NoError(t, err)
	defer s.Close()
	z, ok := s.(*zstd.File)
	require.True(t, ok, "opened %T, want *zstd.File", s)
	require.Equal(t, 7, z.Frames())
	require.Equal(t, int64(len(want)), s.Size())
	for range 200 {
		off := r.Int64N(int64(len(want)))
		n := r.Int64N(min(int64(len(want))-off, 80000)) + 1
		p := make([]byte, n)
		_, err := s.ReadAtContext(context.Background(), p, off, nil)
		require.NoError(t, err, "ReadAt(%d at %d)", n, off)
		require.Equal(t, want[off:off+n], p, "ReadAt(%d at %d)", n, off)
	}
}

// TestZstdCorrupt: a damaged frame or seek table is an error naming the
// file and position, never a panic or wrong bytes.
func TestZstdCorrupt(t *testing.T) {
	dir := t.TempDir()
	plain := bytes.Repeat([]byte("faiss-sidecar "), 10000)
	var buf bytes.Buffer
	_, err := zstd.CompressSeekable(&buf, bytes.NewReader(plain), 8192, 3, nil)
	require.NoError(t, err)
	good := buf.Bytes()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	// A flipped byte inside frame 0's compressed data.
	bad := bytes.Clone(good)
	bad[20] ^= 0xff
	s, err := storage.Open(context.Background(), write("frame.zst", bad), storage.Options{Backend: "zstd"})
	require.NoError(t, err)
	_, err = s.ReadAtContext(context.Background(), make([]byte, 100), 0, nil)
	require.Error(t, err, "corrupt frame")
	require.Contains(t, err.Error(), "frame 0 at byte 0", "corrupt frame")
	require.Contains(t, err.Error(), "frame.zst", "corrupt frame")
	s.Close()
	// A seek table whose sizes disagree with the file.
	bad = bytes.Clone(good)
	bad[len(bad)-9-12] ^= 0x01 // last entry's compressed size
	_, err = storage.Open(context.Background(), write("table.zst", bad), storage.Options{Backend: "zstd"})
	require.ErrorContains(t, err, "table.zst", "corrupt seek table")
	// Not compressed at all: explicit zstd fails, auto falls back to pread.
	p := write("plain.bin", plain)
	_, err = storage.Open(context.Background(), p, storage.Options{Backend: "zstd"})
	require.ErrorContains(t, err, "no seek table", "plain file as zstd")
	s, err = storage.Open(context.Background(), p, storage.Options{})
	require.NoError(t, err, "auto on a plain file")
	require.Equal(t, int64(len(plain)), s.Size(), "auto on a plain file")
	s.Close()
}
