package readahead

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// source is a byte slice read through ReadAt that counts its reads, their
// bytes and the most in flight at once; a read of failAt fails.
type source struct {
	b                []byte
	delay            time.Duration
	reads, bytesRead atomic.Int64
	inflight, most   atomic.Int64
	mu               sync.Mutex
	failAt           int64
	// misaligned counts reads (after the first) whose offset or buffer
	// is not a multiple of Align, or whose length is not, short of the end.
	misaligned atomic.Int64
}

func (s *source) ReadAt(p []byte, off int64) (int, error) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(s.delay)
	if s.reads.Add(1) > 1 && (off%Align != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p)))%Align != 0 ||
		(len(p)%Align != 0 && off+int64(len(p)) != int64(len(s.b)))) {
		s.misaligned.Add(1)
	}
	s.bytesRead.Add(int64(len(p)))
	s.mu.Lock()
	fail := s.failAt >= off && s.failAt < off+int64(len(p))
	s.mu.Unlock()
	if fail {
		return 0, errors.New("injected failure")
	}
	if off < 0 || off+int64(len(p)) > int64(len(s.b)) {
		return 0, io.ErrUnexpectedEOF
	}
	return copy(p, s.b[off:]), nil
}

func data(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// A stream of reads of any size gets the source's bytes, read ahead in
// parallel: the source sees the first read as it is, then chunks aligned
// to Align in the file and in memory, and never more than Ahead chunks
// past the end of what was asked.
func TestStream(t *testing.T) {
	for _, step := range []int{1, 100, 999, 4095, 4096, 4097, 50000} {
		src := &source{b: data(523457), failAt: -1, delay: time.Millisecond}
		r := New(src, int64(len(src.b)), 4000, 3) // rounded up to 4096
		var got []byte
		buf := make([]byte, step)
		for off := 0; off < len(src.b); off += step {
			n := min(step, len(src.b)-off)
			k, err := r.ReadAt(buf[:n], int64(off))
			require.NoError(t, err)
			require.Equal(t, n, k)
			got = append(got, buf[:n]...)
		}
		require.NoError(t, r.Close())
		require.True(t, bytes.Equal(src.b, got), "step %d", step)
		assert.LessOrEqual(t, src.bytesRead.Load(), int64(len(src.b)+step+Align), "step %d: each byte read once, the first read and an aligned chunk's head aside", step)
		if step < 4096 {
			assert.LessOrEqual(t, src.reads.Load(), int64(len(src.b)/4096+2), "step %d: chunks, not reads", step)
		}
		assert.Zero(t, src.misaligned.Load(), "step %d: chunks aligned", step)
		assert.GreaterOrEqual(t, src.most.Load(), int64(2), "step %d: chunks in flight together", step)
	}
}

// Scattered reads go to the source as they are: nothing read ahead.
func TestJumps(t *testing.T) {
	src := &source{b: data(100000), failAt: -1}
	r := New(src, int64(len(src.b)), 1000, 4)
	buf := make([]byte, 300)
	for _, off := range []int64{50000, 1000, 99000, 20000, 70000, 0} {
		_, err := r.ReadAt(buf, off)
		require.NoError(t, err)
		require.Equal(t, src.b[off:off+300], buf)
	}
	assert.Equal(t, int64(6), src.reads.Load())
	assert.Equal(t, int64(6*300), src.bytesRead.Load())
	// A read continuing the last one starts the read-ahead, another jump
	// leaves it.
	_, err := r.ReadAt(buf, 300)
	require.NoError(t, err)
	require.Equal(t, src.b[300:600], buf)
	_, err = r.ReadAt(buf, 600)
	require.NoError(t, err)
	require.Equal(t, src.b[600:900], buf)
	_, err = r.ReadAt(buf, 90000)
	require.NoError(t, err)
	require.Equal(t, src.b[90000:90300], buf)
	require.NoError(t, r.Close())
}

// A failed chunk fails the read that needs it, with the source's error; a
// later read asks the source again. A range past the end is the source's
// error.
func TestErrors(t *testing.T) {
	src := &source{b: data(40000), failAt: 12400}
	r := New(src, int64(len(src.b)), 4096, 4)
	buf := make([]byte, 500)
	var err error
	off := int64(0)
	for ; off < 20000; off += 500 {
		if _, err = r.ReadAt(buf, off); err != nil {
			break
		}
	}
	require.EqualError(t, err, "injected failure")
	assert.Equal(t, int64(12000), off, "the first read that needs the failed chunk [12288, 16384)")
	src.mu.Lock()
	src.failAt = -1
	src.mu.Unlock()
	_, err = r.ReadAt(buf, 12000)
	require.NoError(t, err)
	require.Equal(t, src.b[12000:12500], buf)
	_, err = r.ReadAt(buf, 39800)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	n, err := r.ReadAt(nil, 5)
	assert.Zero(t, n)
	assert.NoError(t, err)
	require.NoError(t, r.Close())
}
