package partial_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/stretchr/testify/require"
)

// TestDirectLargeBatches: large batches from several goroutines at once,
// aligned or not (bounced), at a small depth and at the ring's, twice each,
// read exactly the file's bytes.
func TestDirectLargeBatches(t *testing.T) {
	path, want := partialtest.PatternFile(t, 4<<20+333)
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
					if err := d.ReadBatch(context.Background(), reqs); err != nil {
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
	if err := d.ReadBatch(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	for _, q := range reqs {
		if !bytes.Equal(q.Buf, want[q.Off:q.Off+4096]) || q.IO.DeviceReads != 1 {
			t.Fatalf("batch read at %d: wrong bytes or tally %+v", q.Off, q.IO)
		}
	}
	tail := []partial.ReadReq{{Off: 1 << 20, Buf: d.AlignedBuffer(4096)}}
	if err := d.ReadBatch(context.Background(), tail); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("aligned read past the end: %v", err)
	}
}

// TestDirectReadBatchEach: each request is handed over exactly once, with
// its bytes in place when it is; aligned and bounced, with few reads in
// flight (so completions are handled while submission waits) and with the
// ring's depth; a read past the end is handed over with its error.
func TestDirectReadBatchEach(t *testing.T) {
	path, want := partialtest.PatternFile(t, 1<<20+100)
	for _, depth := range []int{2, 1024} { // 1024: more than the ring holds
		d := openDirect(t, path, depth)
		for _, shift := range []int64{0, 7} { // 7: unaligned, bounced
			var reqs []partial.ReadReq
			for i := 0; i < 300; i++ {
				reqs = append(reqs, partial.ReadReq{Off: int64((i*37)%256*4096) + shift, Buf: d.AlignedBuffer(4096)})
			}
			reqs = append(reqs, partial.ReadReq{Off: 1 << 20, Buf: d.AlignedBuffer(4096)}) // runs past the end
			calls := make([]int, len(reqs))
			err := d.ReadBatchEach(context.Background(), reqs, func(i int) {
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

// TestMemoryAlignOffset: the byte at AlignOffset sits on a cache line, and
// the bytes served are the file's.
func TestMemoryAlignOffset(t *testing.T) {
	path, data := partialtest.PatternFile(t, 5<<20)
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

// directPattern opens a patternFile of n bytes with O_DIRECT, closed when
// the test ends, and returns it with the file's contents.
func directPattern(t *testing.T, n int) (*partial.Direct, []byte) {
	t.Helper()
	path, data := partialtest.PatternFile(t, n)
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

// TestDirectClosedBatch: a batch on a closed file reads nothing, and says
// so in every request (each handed over once with its error), as
// BatchReader's contract asks, not only in the batch's error.
func TestDirectClosedBatch(t *testing.T) {
	path, _ := partialtest.PatternFile(t, 1<<16)
	for _, depth := range []int{0, 2} {
		d := openDirect(t, path, depth)
		require.NoError(t, d.Close())
		reqs := []partial.ReadReq{{Off: 0, Buf: make([]byte, 100)}, {Off: 4096, Buf: make([]byte, 4096)}, {Off: 7, Buf: make([]byte, 10)}}
		calls := make([]int, len(reqs))
		err := d.ReadBatchEach(context.Background(), reqs, func(i int) { calls[i]++ })
		require.Error(t, err, "depth %d", depth)
		for i, q := range reqs {
			require.ErrorIs(t, q.Err, err, "depth %d request %d", depth, i)
			require.Equal(t, 1, calls[i], "depth %d request %d handed over once", depth, i)
		}
	}
}
