// Package readahead streams a file or an object: once a caller reads
// sequentially, the bytes that follow are read ahead in large chunks, several
// in flight at once, so a stream over a high-latency source (an s3:// object:
// one ranged GET per chunk) runs at the source's throughput rather than one
// round trip per read.
package readahead

import (
	"io"
	"sync"
	"unsafe"
)

// Defaults of New.
const (
	// DefaultChunk is the size of one read ahead (one GET on s3).
	DefaultChunk = 8 << 20
	// DefaultAhead is how many chunks beyond the caller's position are in
	// flight: the memory a stream holds is about (DefaultAhead+1)·chunk.
	DefaultAhead = 4
	// Align is the block chunks are aligned to, in the source and in
	// memory, so a source opened with O_DIRECT reads each chunk straight
	// into its buffer (an unaligned read goes through 64 KiB bounce reads
	// one at a time, a quarter of the device's streaming rate).
	Align = 4096
)

// Reader is an io.ReaderAt over r (size bytes) that serves sequential reads
// from chunks read ahead in parallel. A read that does not continue the
// previous one (a jump: the first read, a sample elsewhere) goes to r as it
// is, and the chunks read ahead for the old position are dropped; the read
// after it, if it continues it, starts the read-ahead there. So scattered
// reads cost what they cost without a Reader, and a stream costs one round
// trip per Ahead chunks.
//
// A Reader is safe for concurrent use, but its reads are served one at a
// time: it is made for one consumer reading in order.
type Reader struct {
	r     io.ReaderAt
	size  int64
	chunk int64
	ahead int

	mu   sync.Mutex
	next int64    // where the last read ended: a read from here continues it
	win  []*piece // read or in flight, contiguous from win[0].off
	free [][]byte // buffers of whole chunks, for reuse
	all  sync.WaitGroup
}

type piece struct {
	off  int64
	buf  []byte
	done chan struct{}
	err  error
}

func (p *piece) end() int64 { return p.off + int64(len(p.buf)) }

// New returns a Reader over r of size bytes reading ahead chunk bytes
// (rounded up to Align) at a time, ahead chunks in flight beyond the
// caller's position (≤ 0: the defaults). Chunks start at multiples of
// Align.
func New(r io.ReaderAt, size int64, chunk, ahead int) *Reader {
	if chunk <= 0 {
		chunk = DefaultChunk
	}
	chunk = (chunk + Align - 1) / Align * Align
	if ahead <= 0 {
		ahead = DefaultAhead
	}
	return &Reader{r: r, size: size, chunk: int64(chunk), ahead: ahead, next: -1}
}

// ReadAt reads len(p) bytes at off: from the chunks read ahead when the read
// continues the previous one (or falls in what is read ahead), from r
// otherwise.
func (s *Reader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	end := off + int64(len(p))
	if off < 0 || end > s.size {
		return s.r.ReadAt(p, off) // r words the range error
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if off != s.next && !s.holds(off) {
		s.drop(len(s.win))
		s.next = end
		return s.r.ReadAt(p, off)
	}
	s.next = end
	// Chunks wholly before the read are done with.
	k := 0
	for k < len(s.win) && s.win[k].end() <= off {
		k++
	}
	s.drop(k)
	// Keep Ahead chunks in flight past the read's end.
	at := off - off%Align
	if n := len(s.win); n > 0 {
		at = s.win[n-1].end()
	}
	for target := min(s.size, end+int64(s.ahead)*s.chunk); at < target; at += s.chunk {
		s.start(at, min(s.chunk, s.size-at))
	}
	n := 0
	for _, pc := range s.win {
		if pc.off >= end {
			break
		}
		<-pc.done
		if pc.err != nil {
			err := pc.err
			s.drop(len(s.win)) // a later read asks r again
			s.next = -1
			return 0, err
		}
		if pc.end() > off {
			lo := max(off, pc.off)
			n += copy(p[lo-off:], pc.buf[lo-pc.off:min(end, pc.end())-pc.off])
		}
	}
	return n, nil
}

// alignedBuf returns n bytes starting at a multiple of Align in memory.
func alignedBuf(n int) []byte {
	b := make([]byte, n+Align)
	shift := (Align - int(uintptr(unsafe.Pointer(&b[0])))%Align) % Align
	return b[shift : shift+n : shift+n]
}

// holds reports whether off lies in what is read ahead.
func (s *Reader) holds(off int64) bool {
	return len(s.win) > 0 && s.win[0].off <= off && off < s.win[len(s.win)-1].end()
}

// start reads [off, off+n) in the background and appends it to the window.
func (s *Reader) start(off, n int64) {
	var buf []byte
	if k := len(s.free); k > 0 && n == s.chunk {
		buf, s.free = s.free[k-1], s.free[:k-1]
	} else {
		buf = alignedBuf(int(n))
	}
	pc := &piece{off: off, buf: buf, done: make(chan struct{})}
	s.win = append(s.win, pc)
	s.all.Add(1)
	go func() {
		defer s.all.Done()
		_, pc.err = s.r.ReadAt(pc.buf, pc.off)
		close(pc.done)
	}()
}

// drop forgets the window's first k chunks; the buffers of those already
// read are kept for reuse (those in flight are left to the collector).
func (s *Reader) drop(k int) {
	for _, pc := range s.win[:k] {
		select {
		case <-pc.done:
			if int64(len(pc.buf)) == s.chunk && len(s.free) <= s.ahead {
				s.free = append(s.free, pc.buf)
			}
		default:
		}
	}
	s.win = append(s.win[:0], s.win[k:]...)
}

// Close waits for the reads in flight, so the source may be closed after it;
// the Reader is not used after Close.
func (s *Reader) Close() error {
	s.all.Wait()
	s.mu.Lock()
	s.win, s.free = nil, nil
	s.mu.Unlock()
	return nil
}
