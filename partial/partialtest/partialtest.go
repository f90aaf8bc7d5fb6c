package partialtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// Opener opens the file at path with the backend under test.
type Opener func(t *testing.T, path string) partial.Storage

// Prepare, when set on a suite, turns the plain test file into what the
// backend reads (e.g. compresses it) and returns the new path.
type Prepare func(t *testing.T, plain string) string

// Run runs the conformance suite: random ranges compared with os.ReadFile,
// the tail, reads past the end, zero-length reads, concurrent readers,
// batched reads and views where offered, reads under a context that has
// ended, double close, read after close and close while reads are in
// flight.
func Run(t *testing.T, open Opener, prep Prepare) {
	for _, size := range []int{0, 1, 4095, 1<<20 + 123} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			path, want := writeRandom(t, size)
			if prep != nil {
				path = prep(t, path)
			}
			runFile(t, open, path, want)
		})
	}
}

func writeRandom(t *testing.T, size int) (string, []byte) {
	t.Helper()
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(size), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "data.bin")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, b
}

// read is s.ReadAtContext under a context that never ends.
func read(s partial.Storage, p []byte, off int64) (int, error) {
	return s.ReadAtContext(context.Background(), p, off, nil)
}

func runFile(t *testing.T, open Opener, path string, want []byte) {
	size := int64(len(want))
	s := open(t, path)
	if s.Size() != size {
		t.Fatalf("Size() = %d, want %d", s.Size(), size)
	}
	r := rand.New(rand.NewPCG(1, 2))
	check := func(off, n int64) {
		t.Helper()
		p := make([]byte, n)
		got, err := read(s, p, off)
		if err != nil || got != int(n) || !bytes.Equal(p, want[off:off+n]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; bytes equal: %v", n, off, got, err, bytes.Equal(p, want[off:off+n]))
		}
	}
	t.Run("random ranges", func(t *testing.T) {
		for range 300 {
			if size == 0 {
				break
			}
			off := r.Int64N(size)
			check(off, r.Int64N(min(size-off, 20000))+1)
		}
	})
	t.Run("tail and whole", func(t *testing.T) {
		if size > 0 {
			check(size-1, 1)
			check(max(size-100, 0), min(100, size))
			check(0, size)
		}
	})
	t.Run("zero length", func(t *testing.T) {
		for _, off := range []int64{0, size / 2, size} {
			if n, err := read(s, nil, off); n != 0 || err != nil {
				t.Fatalf("zero-length read at %d = %d, %v", off, n, err)
			}
		}
	})
	t.Run("past the end", func(t *testing.T) {
		for _, c := range [][2]int64{{size, 1}, {size + 10, 4}, {max(size-3, 0), 10}, {-1, 1}} {
			p := make([]byte, c[1])
			n, err := read(s, p, c[0])
			if err == nil {
				t.Fatalf("ReadAt(%d bytes at %d) of a %d-byte file = %d, nil: want an error", c[1], c[0], size, n)
			}
			if c[0] >= 0 && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("past-the-end error %v does not wrap io.EOF or io.ErrUnexpectedEOF", err)
			}
		}
	})
	t.Run("concurrent readers", func(t *testing.T) {
		if size == 0 {
			return
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 3))
				p := make([]byte, 5000)
				for range 200 {
					off := r.Int64N(size)
					n := r.Int64N(min(size-off, 5000)) + 1
					if _, err := read(s, p[:n], off); err != nil || !bytes.Equal(p[:n], want[off:off+n]) {
						errs <- fmt.Errorf("concurrent ReadAt(%d at %d): %v", n, off, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
	if br, ok := s.(partial.BatchReader); ok && size > 0 {
		t.Run("batch", func(t *testing.T) {
			reqs := make([]partial.ReadReq, 100)
			for i := range reqs {
				off := r.Int64N(size)
				reqs[i] = partial.ReadReq{Off: off, Buf: make([]byte, r.Int64N(min(size-off, 9000))+1)}
			}
			if err := br.ReadBatch(context.Background(), reqs); err != nil {
				t.Fatal(err)
			}
			for _, q := range reqs {
				if q.Err != nil || !bytes.Equal(q.Buf, want[q.Off:q.Off+int64(len(q.Buf))]) {
					t.Fatalf("batch request at %d: %v", q.Off, q.Err)
				}
			}
			bad := []partial.ReadReq{{Off: size, Buf: make([]byte, 4)}}
			if err := br.ReadBatch(context.Background(), bad); err == nil || bad[0].Err == nil {
				t.Fatal("batch read past the end succeeded")
			}
		})
	}
	if v, ok := s.(partial.Viewer); ok && size > 0 {
		t.Run("views", func(t *testing.T) {
			if err := v.Acquire(); err != nil {
				t.Fatal(err)
			}
			defer v.Release()
			for range 100 {
				off := r.Int64N(size)
				n := r.Int64N(min(size-off, 8000)) + 1
				b, err := v.View(off, n)
				if err != nil || !bytes.Equal(b, want[off:off+n]) {
					t.Fatalf("View(%d, %d): %v", off, n, err)
				}
			}
			if _, err := v.View(size, 1); err == nil {
				t.Fatal("View past the end succeeded")
			}
		})
	}
	if size > 0 {
		t.Run("context ended", func(t *testing.T) { contextEnded(t, s, want) })
	}
	if sr, ok := s.(partial.StatsReporter); ok {
		if st := sr.Stats(); st.Requests == 0 && size > 0 {
			t.Errorf("Stats() counted no requests: %+v", st)
		}
	}
	t.Run("close while reading", func(t *testing.T) { closeWhileReading(t, open, path, want) })
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, partial.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if _, err := read(s, make([]byte, 1), 0); !errors.Is(err, partial.ErrClosed) {
		t.Fatalf("ReadAt after Close = %v, want ErrClosed", err)
	}
	if v, ok := s.(partial.Viewer); ok {
		if err := v.Acquire(); !errors.Is(err, partial.ErrClosed) {
			t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
		}
	}
}

// closeWhileReading closes a Storage while goroutines read from it (and, for
// Viewers, while a view is held): readers must see correct bytes or
// ErrClosed, and a held view must stay readable until Release.
func closeWhileReading(t *testing.T, open Opener, path string, want []byte) {
	size := int64(len(want))
	if size == 0 {
		return
	}
	s := open(t, path)
	var held []byte
	v, isViewer := s.(partial.Viewer)
	if isViewer {
		if err := v.Acquire(); err != nil {
			t.Fatal(err)
		}
		var err error
		if held, err = v.View(0, size); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var reads atomic.Int64
	start := make(chan struct{})
	fail := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			p := make([]byte, 4096)
			<-start
			for {
				off := r.Int64N(size)
				n := min(size-off, 4096)
				_, err := read(s, p[:n], off)
				if errors.Is(err, partial.ErrClosed) {
					return
				}
				if err != nil || !bytes.Equal(p[:n], want[off:off+n]) {
					fail <- fmt.Errorf("read during close at %d: %v", off, err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	close(start)
	for reads.Load() < 100 {
		runtime.Gosched() // let the readers get going
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close with reads in flight: %v", err)
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if isViewer {
		if !bytes.Equal(held, want) { // still mapped: Close waits for Release
			t.Fatal("a view held across Close changed")
		}
		v.Release()
	}
}

// contextEnded reads under a context cancelled before the read (once
// cached, for caches: a hit too): a storage whose reads can block (any but
// a Viewer, whose bytes are in memory) fails at once with an error
// wrapping context.Canceled, in ReadAtContext and in every request of a
// batch; a Viewer may serve the bytes instead.
func contextEnded(t *testing.T, s partial.Storage, want []byte) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, inMemory := s.(partial.Viewer)
	n := min(int64(len(want)), 3000)
	check := func(what string, err error, p []byte, off int64) {
		t.Helper()
		switch {
		case err == nil && inMemory:
			if !bytes.Equal(p, want[off:off+int64(len(p))]) {
				t.Fatalf("%s under an ended context served wrong bytes", what)
			}
		case err == nil:
			t.Fatalf("%s under an ended context succeeded: a storage whose reads can block must give up", what)
		case !errors.Is(err, context.Canceled):
			t.Fatalf("%s under an ended context: %v, want an error wrapping context.Canceled", what, err)
		}
	}
	for _, off := range []int64{0, int64(len(want)) - n} {
		p := make([]byte, n)
		start := time.Now()
		_, err := s.ReadAtContext(ctx, p, off, nil)
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a read under an ended context took %v", took)
		}
		check(fmt.Sprintf("ReadAtContext(%d bytes at %d)", n, off), err, p, off)
	}
	if br, ok := s.(partial.BatchReader); ok {
		reqs := []partial.ReadReq{{Off: 0, Buf: make([]byte, n)}, {Off: int64(len(want)) - n, Buf: make([]byte, n)}}
		err := br.ReadBatch(ctx, reqs)
		if err == nil && !inMemory {
			t.Fatal("a batch under an ended context succeeded")
		}
		for _, q := range reqs {
			check(fmt.Sprintf("batch request at %d", q.Off), q.Err, q.Buf, q.Off)
		}
	}
}

// Faulty wraps a Storage and fails reads for which Fail returns an error.
type Faulty struct {
	partial.Storage
	Fail func(off, n int64) error
}

func (f *Faulty) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	if err := f.Fail(off, int64(len(p))); err != nil {
		return 0, err
	}
	return f.Storage.ReadAtContext(ctx, p, off, t)
}

// Stall wraps a Storage whose reads wait, as a stalled object store's do,
// until Resume is called or their context ends (then failing with its
// cause).
type Stall struct {
	partial.Storage
	gate chan struct{}
	once sync.Once
	// Calls counts the reads made, waiting or not.
	Calls atomic.Int64
}

// NewStall stalls the reads of s.
func NewStall(s partial.Storage) *Stall { return &Stall{Storage: s, gate: make(chan struct{})} }

// Resume lets the waiting reads, and every later one, go on.
func (s *Stall) Resume() { s.once.Do(func() { close(s.gate) }) }

func (s *Stall) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	s.Calls.Add(1)
	select {
	case <-s.gate:
		return s.Storage.ReadAtContext(ctx, p, off, t)
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// A Wrapper puts the cache under test in front of inner.
type Wrapper func(t *testing.T, inner partial.Storage) partial.Storage

// RunStalledFill checks a cache's reads against a stalled storage below
// it: a read waiting on another reader's fill (one that has no deadline)
// returns at its own deadline, with an error wrapping
// context.DeadlineExceeded, having started no read of its own; a read
// under a context that has ended fails at once; the filling reader gets
// its bytes once the storage answers.
func RunStalledFill(t *testing.T, wrap Wrapper) {
	data := make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	inner := NewStall(partial.NewMemory("stalled", data))
	s := wrap(t, inner)
	defer s.Close()
	defer inner.Resume()
	filled := make(chan error, 1)
	go func() {
		p := make([]byte, 100)
		_, err := read(s, p, 10)
		if err == nil && !bytes.Equal(p, data[10:110]) {
			err = errors.New("the filling read got wrong bytes")
		}
		filled <- err
	}()
	for start := time.Now(); inner.Calls.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the first read never reached the storage")
		}
	}
	calls := inner.Calls.Load()

	const deadline = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := s.ReadAtContext(ctx, make([]byte, 50), 20, nil)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read waiting on a stalled fill: %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if took < deadline || took > deadline+time.Second {
		t.Fatalf("a read waiting on a stalled fill with a %v deadline returned after %v", deadline, took)
	}
	if got := inner.Calls.Load(); got != calls {
		t.Fatalf("the waiting read made %d reads of its own, want none: it should wait on the fill", got-calls)
	}

	ended, cancelEnded := context.WithCancel(context.Background())
	cancelEnded()
	start = time.Now()
	if _, err := s.ReadAtContext(ended, make([]byte, 50), 20, nil); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("a read under an ended context during a stalled fill: %v after %v, want context.Canceled at once", err, time.Since(start))
	}

	inner.Resume()
	if err := <-filled; err != nil {
		t.Fatalf("the filling read, once the storage answered: %v", err)
	}
	p := make([]byte, 1000)
	if _, err := read(s, p, 60_000); err != nil || !bytes.Equal(p, data[60_000:61_000]) {
		t.Fatalf("a read after the stall: %v", err)
	}
}

// EIOAt returns a Fail function that fails every read touching byte at with
// EIO, as a bad sector would.
func EIOAt(at int64) func(off, n int64) error {
	return func(off, n int64) error {
		if off <= at && at < off+n {
			return syscall.EIO
		}
		return nil
	}
}

// Trace wraps an io.ReaderAt and records every read (offset, length).
type Trace struct {
	R     io.ReaderAt
	mu    sync.Mutex
	Reads [][2]int64
}

func (t *Trace) ReadAt(p []byte, off int64) (int, error) {
	t.mu.Lock()
	t.Reads = append(t.Reads, [2]int64{off, int64(len(p))})
	t.mu.Unlock()
	return t.R.ReadAt(p, off)
}

// Snapshot returns a copy of the reads so far.
func (t *Trace) Snapshot() [][2]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([][2]int64(nil), t.Reads...)
}

// Len is how many reads there have been so far.
func (t *Trace) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.Reads)
}

// Since returns a copy of the reads after the first n: one operation's
// reads without copying the whole trace again (Snapshot()[n:] per query
// made a test's cost grow with the square of its queries).
func (t *Trace) Since(n int) [][2]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([][2]int64(nil), t.Reads[n:]...)
}

// PatternFile writes n bytes of a pattern that differs from one 4 KiB block
// to the next (so a block read from the wrong place shows) to a temporary
// file and returns its path and contents.
func PatternFile(t *testing.T, n int) (string, []byte) {
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
