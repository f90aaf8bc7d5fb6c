package partial_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/stretchr/testify/require"
)

func opener(o partial.Options) partialtest.Opener {
	return func(t *testing.T, path string) partial.Storage {
		t.Helper()
		s, err := partial.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func compress(frame int) partialtest.Prepare {
	return func(t *testing.T, plain string) string {
		t.Helper()
		in, err := os.Open(plain)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		out := filepath.Join(t.TempDir(), "data.zst")
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := partial.CompressSeekable(f, in, frame, 3, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
}

func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) { partialtest.Run(t, opener(partial.Options{Backend: "memory"}), nil) })
	t.Run("memory aligned", func(t *testing.T) {
		partialtest.Run(t, opener(partial.Options{Backend: "memory", AlignOffset: 4099}), nil)
	})
	t.Run("mmap", func(t *testing.T) { partialtest.Run(t, opener(partial.Options{Backend: "mmap"}), nil) })
	t.Run("pread", func(t *testing.T) { partialtest.Run(t, opener(partial.Options{Backend: "pread"}), nil) })
	t.Run("pread aligned", func(t *testing.T) {
		partialtest.Run(t, opener(partial.Options{Backend: "pread", AlignOffset: 4099}), nil)
	})
	t.Run("pread aligned tiny cache", func(t *testing.T) { // no mirror below the file's size: the offset is moot
		partialtest.Run(t, opener(partial.Options{Backend: "pread", AlignOffset: 58, CacheBytes: 128 << 10}), nil)
	})
	t.Run("pread tiny cache", func(t *testing.T) {
		partialtest.Run(t, opener(partial.Options{Backend: "pread", CacheBytes: 64 << 10, BlockSize: 512}), nil)
	})
	t.Run("direct", func(t *testing.T) { partialtest.Run(t, opener(partial.Options{Backend: "direct"}), nil) })
	t.Run("direct cached", func(t *testing.T) {
		partialtest.Run(t, opener(partial.Options{Backend: "direct", CacheBytes: 1 << 20}), nil)
	})
	if !partial.ZstdSupported {
		t.Run("zstd unsupported", func(t *testing.T) {
			_, err := partial.OpenZstd("x.zst", nil, 1<<20)
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("without cgo OpenZstd = %v, want errors.ErrUnsupported", err)
			}
		})
		return
	}
	t.Run("zstd", func(t *testing.T) { partialtest.Run(t, opener(partial.Options{Backend: "zstd"}), compress(4096)) })
	t.Run("zstd auto-detected", func(t *testing.T) {
		partialtest.Run(t, opener(partial.Options{CacheBytes: 32 << 10}), compress(1000))
	})
}

// TestIOErrorsNameTheOffset: an EIO from below reaches the caller with the
// offset in the message, through the block cache.
func TestIOErrorsNameTheOffset(t *testing.T) {
	m := partial.NewMemory("mem", make([]byte, 100000))
	bad := &partialtest.Faulty{Storage: m, Fail: partialtest.EIOAt(50000)}
	c, err := partial.NewCached("faulty.bin", bad, nil, 1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadAt(make([]byte, 10), 10); err != nil {
		t.Fatalf("healthy block: %v", err)
	}
	_, err = c.ReadAt(make([]byte, 100), 49990)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "offset 49152") || !strings.Contains(err.Error(), "faulty.bin") {
		t.Fatalf("err = %v; want EIO naming the file and the block offset 49152", err)
	}
	// The failed block was not cached: a later read retries the device.
	bad.Fail = func(off, n int64) error { return nil }
	if _, err := c.ReadAt(make([]byte, 100), 49990); err != nil {
		t.Fatalf("after the fault cleared: %v", err)
	}
}

func TestUnknownBackend(t *testing.T) {
	_, err := partial.Open("x", partial.Options{Backend: "tape"})
	if err == nil || !strings.Contains(err.Error(), `unknown backend "tape"`) {
		t.Fatalf("err = %v", err)
	}
}

// TestDirectLargeBatches: large batches from several goroutines at once,
// aligned or not (bounced), at a small depth and at the ring's, twice each,
// read exactly the file's bytes.
func TestDirectLargeBatches(t *testing.T) {
	path, want := patternFile(t, 4<<20+333)
	for _, depth := range []int{3, 1024} { // 1024: more than the ring holds
		d := openDirect(t, path, depth)
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 2 {
					var reqs []partial.ReadReq
					for i := range 200 {
						off := int64((i*7919+g*104729+round*13)%(len(want)-5000)) + int64(g) // unaligned unless g is 0
						n := 1 + (i*31)%5000
						reqs = append(reqs, partial.ReadReq{Off: off, Buf: make([]byte, n)})
					}
					if err := d.ReadBatch(reqs); err != nil {
						errs <- err
						return
					}
					for _, q := range reqs {
						if !bytes.Equal(q.Buf, want[q.Off:q.Off+int64(len(q.Buf))]) {
							errs <- fmt.Errorf("depth %d: batch read of %d at %d differs", depth, len(q.Buf), q.Off)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// TestDirectAlignedBatch: aligned batches go through the ring in one call
// and read exactly the file's bytes, the last block short at the tail.
func TestDirectAlignedBatch(t *testing.T) {
	d, want := directPattern(t, 1<<20+100)
	var reqs []partial.ReadReq
	for i := 0; i < 300; i++ { // more than the ring holds at once
		off := int64((i * 37) % 256 * 4096)
		reqs = append(reqs, partial.ReadReq{Off: off, Buf: d.AlignedBuffer(4096)})
	}
	if err := d.ReadBatch(reqs); err != nil {
		t.Fatal(err)
	}
	for _, q := range reqs {
		if !bytes.Equal(q.Buf, want[q.Off:q.Off+4096]) || q.IO.DeviceReads != 1 {
			t.Fatalf("batch read at %d: wrong bytes or tally %+v", q.Off, q.IO)
		}
	}
	tail := []partial.ReadReq{{Off: 1 << 20, Buf: d.AlignedBuffer(4096)}}
	if err := d.ReadBatch(tail); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("aligned read past the end: %v", err)
	}
}

// TestDirectReadBatchEach: each request is handed over exactly once, with
// its bytes in place when it is; aligned and bounced, with few reads in
// flight (so completions are handled while submission waits) and with the
// ring's depth; a read past the end is handed over with its error.
func TestDirectReadBatchEach(t *testing.T) {
	path, want := patternFile(t, 1<<20+100)
	for _, depth := range []int{2, 1024} { // 1024: more than the ring holds
		d := openDirect(t, path, depth)
		for _, shift := range []int64{0, 7} { // 7: unaligned, bounced
			var reqs []partial.ReadReq
			for i := 0; i < 300; i++ {
				reqs = append(reqs, partial.ReadReq{Off: int64((i*37)%256*4096) + shift, Buf: d.AlignedBuffer(4096)})
			}
			reqs = append(reqs, partial.ReadReq{Off: 1 << 20, Buf: d.AlignedBuffer(4096)}) // runs past the end
			calls := make([]int, len(reqs))
			err := d.ReadBatchEach(reqs, func(i int) {
				calls[i]++
				q := reqs[i]
				if i == len(reqs)-1 {
					if !errors.Is(q.Err, io.ErrUnexpectedEOF) {
						t.Errorf("depth %d shift %d: read past the end handed over with %v", depth, shift, q.Err)
					}
					return
				}
				if q.Err != nil || !bytes.Equal(q.Buf, want[q.Off:q.Off+4096]) {
					t.Errorf("depth %d shift %d: request %d handed over before its bytes (err %v)", depth, shift, i, q.Err)
				}
			})
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("depth %d shift %d: batch error %v, want the read past the end", depth, shift, err)
			}
			for i, n := range calls {
				if n != 1 {
					t.Fatalf("depth %d shift %d: request %d handed over %d times", depth, shift, i, n)
				}
			}
		}
	}
}

// TestCachedBatchAttribution: a batch reads its missing blocks once and
// counts each as a miss of the first request that reads it; requests
// sharing a block count a hit. A nil-tally ViewBlock (a peek) counts nothing.
func TestCachedBatchAttribution(t *testing.T) {
	path, want := patternFile(t, 64<<10)
	s, err := partial.Open(path, partial.Options{Backend: "direct", CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.(*partial.Cached)
	reqs := []partial.ReadReq{
		{Off: 100, Buf: make([]byte, 50)},          // block 0
		{Off: 200, Buf: make([]byte, 50)},          // block 0 again
		{Off: 5*4096 + 10, Buf: make([]byte, 100)}, // block 5
		{Off: 9*4096 - 10, Buf: make([]byte, 20)},  // blocks 8 and 9
	}
	if err := c.ReadBatch(reqs); err != nil {
		t.Fatal(err)
	}
	var tot partial.Tally
	for _, q := range reqs {
		if !bytes.Equal(q.Buf, want[q.Off:q.Off+int64(len(q.Buf))]) {
			t.Fatalf("request at %d: wrong bytes", q.Off)
		}
		tot.CacheHits += q.IO.CacheHits
		tot.CacheMisses += q.IO.CacheMisses
	}
	if tot.CacheMisses != 4 || tot.CacheHits != 1 || reqs[1].IO.CacheHits != 1 {
		t.Fatalf("tallies %+v, want 4 misses (blocks 0, 5, 8, 9) and 1 hit (block 0 again)", tot)
	}
	before := c.Stats()
	if _, ok := c.ViewBlock(100, 10, nil); !ok {
		t.Fatal("block 0 not cached")
	}
	if after := c.Stats(); after != before {
		t.Fatalf("a peek changed the stats: %+v -> %+v", before, after)
	}
	if st := c.Stats(); st.CacheMisses != 4 || st.CacheHits != 1 {
		t.Fatalf("backend stats %+v, want 4 misses and 1 hit", st)
	}
}

// TestMemoryAlignOffset: the byte at AlignOffset sits on a cache line, and
// the bytes served are the file's.
func TestMemoryAlignOffset(t *testing.T) {
	path, data := patternFile(t, 5<<20)
	for _, align := range []int64{0, 1, 58, 64, 14433274} {
		m, err := partial.OpenMemoryAligned(path, align%int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		off := align % int64(len(data))
		v, err := m.View(off, 1)
		if err != nil {
			t.Fatal(err)
		}
		if addr := uintptr(unsafe.Pointer(&v[0])); align != 0 && addr%64 != 0 {
			t.Errorf("align %d: byte %d at address %#x, not on a 64-byte line", align, off, addr)
		}
		all, err := m.View(0, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(all, data) {
			t.Errorf("align %d: memory differs from the file", align)
		}
		if got := m.Stats().ResidentBytes; got != int64(len(data)) {
			t.Errorf("align %d: resident %d bytes, want %d", align, got, len(data))
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// patternFile writes n bytes of a pattern that differs from one 4 KiB block
// to the next (so a block read from the wrong place shows) to a temporary
// file and returns its path and contents.
func patternFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*13 + i>>12 + i>>20)
	}
	path := filepath.Join(t.TempDir(), "f.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// directPattern opens a patternFile of n bytes with O_DIRECT, closed when
// the test ends, and returns it with the file's contents.
func directPattern(t *testing.T, n int) (*partial.Direct, []byte) {
	t.Helper()
	path, data := patternFile(t, n)
	return openDirect(t, path, 0), data
}

// openDirect opens path with O_DIRECT and up to parallel reads in flight,
// closed when the test ends.
func openDirect(t *testing.T, path string, parallel int) *partial.Direct {
	t.Helper()
	d, err := partial.OpenDirect(path, parallel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestDirectParallelOption: the parallelism is fixed at open; a negative
// one is refused as a bad option.
func TestDirectParallelOption(t *testing.T) {
	path, _ := patternFile(t, 8192)
	require.Equal(t, partial.DefaultDirectParallel, openDirect(t, path, 0).Parallel())
	require.Equal(t, 7, openDirect(t, path, 7).Parallel())
	_, err := partial.OpenDirect(path, -1)
	require.ErrorIs(t, err, partial.ErrBadOption)
	s, err := partial.Open(path, partial.Options{Backend: "direct", DirectParallel: 5})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, 5, s.(*partial.Direct).Parallel())
}

// TestAutoBackend: Open's "" and the rule it names agree: pread for a
// plain file.
func TestAutoBackend(t *testing.T) {
	path, _ := patternFile(t, 8192)
	b, err := partial.AutoBackend(path, partial.DefaultPlainBackend)
	require.NoError(t, err)
	require.Equal(t, "pread", b)
	b, err = partial.AutoBackend(path, "mmap")
	require.NoError(t, err)
	require.Equal(t, "mmap", b)
	s, err := partial.Open(path, partial.Options{})
	require.NoError(t, err)
	defer s.Close()
	_, ok := s.(*partial.Cached)
	require.True(t, ok, "Open's default on a plain file is pread (a Cached), got %T", s)
	_, err = partial.AutoBackend(filepath.Join(t.TempDir(), "missing"), "mmap")
	require.Error(t, err)
}
