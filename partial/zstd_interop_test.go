//go:build cgo

package partial_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	seekable "github.com/SaveTheRbtz/zstd-seekable-format-go/pkg"
	kzstd "github.com/klauspost/compress/zstd"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
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
	if err != nil {
		t.Fatal(err)
	}
	enc, err := kzstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := seekable.NewWriter(f, enc)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 4096, 70000, 3, 12345, 65536, 999} {
		chunk := make([]byte, n)
		for i := range chunk {
			chunk[i] = byte(r.IntN(16)) // compressible
		}
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		want = append(want, chunk...)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := partial.Open(path, partial.Options{}) // auto-detected by its seek table
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	z, ok := s.(*partial.Zstd)
	if !ok || z.Frames() != 7 || s.Size() != int64(len(want)) {
		t.Fatalf("opened %T with %d bytes, want *partial.Zstd with 7 frames and %d bytes", s, s.Size(), len(want))
	}
	for range 200 {
		off := r.Int64N(int64(len(want)))
		n := r.Int64N(min(int64(len(want))-off, 80000)) + 1
		p := make([]byte, n)
		if _, err := s.ReadAt(p, off); err != nil || !bytes.Equal(p, want[off:off+n]) {
			t.Fatalf("ReadAt(%d at %d): %v", n, off, err)
		}
	}
}

// TestZstdCorrupt: a damaged frame or seek table is an error naming the
// file and position, never a panic or wrong bytes.
func TestZstdCorrupt(t *testing.T) {
	dir := t.TempDir()
	plain := bytes.Repeat([]byte("faiss-sidecar "), 10000)
	var buf bytes.Buffer
	if _, err := partial.CompressSeekable(&buf, bytes.NewReader(plain), 8192, 3, nil); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A flipped byte inside frame 0's compressed data.
	bad := bytes.Clone(good)
	bad[20] ^= 0xff
	s, err := partial.Open(write("frame.zst", bad), partial.Options{Backend: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ReadAt(make([]byte, 100), 0)
	if err == nil || !strings.Contains(err.Error(), "frame 0 at byte 0") || !strings.Contains(err.Error(), "frame.zst") {
		t.Fatalf("corrupt frame: err = %v", err)
	}
	s.Close()
	// A seek table whose sizes disagree with the file.
	bad = bytes.Clone(good)
	bad[len(bad)-9-12] ^= 0x01 // last entry's compressed size
	if _, err := partial.Open(write("table.zst", bad), partial.Options{Backend: "zstd"}); err == nil || !strings.Contains(err.Error(), "table.zst") {
		t.Fatalf("corrupt seek table: err = %v", err)
	}
	// Not compressed at all: explicit zstd fails, auto falls back to pread.
	p := write("plain.bin", plain)
	if _, err := partial.Open(p, partial.Options{Backend: "zstd"}); err == nil || !strings.Contains(err.Error(), "no seek table") {
		t.Fatalf("plain file as zstd: err = %v", err)
	}
	s, err = partial.Open(p, partial.Options{})
	if err != nil || s.Size() != int64(len(plain)) {
		t.Fatalf("auto on a plain file: %v", err)
	}
	s.Close()
}
