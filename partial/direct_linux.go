package partial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// Direct reads a file with O_DIRECT, bypassing the page cache, through an
// io_uring owned by one goroutine (plain pread where io_uring is missing),
// so many reads can be in flight without blocking Go's scheduler. Offsets,
// lengths and buffers are aligned to what the kernel reports for the file
// (statx STATX_DIOALIGN; 4096 when it reports nothing); unaligned requests
// read the covering aligned range into a reused bounce buffer. It
// implements Storage, BatchReader and StatsReporter. Put a
// blockcache.Cached in front of it to keep hot blocks in memory.
type Direct struct {
	fd       int
	name     string
	size     int64
	align    int64 // offset and length alignment
	memAlign int64
	pool     sync.Pool // *[]byte bounce buffers of bounceSize bytes
	batches  sync.Pool // *directBatch scratch of ReadBatch
	ring     *uring    // nil: plain pread (io_uring unavailable)
	// owned are rings a batch takes for itself when one is free (see
	// ownedRing); the others share ring.
	owned chan ownedRing
	life  backendkit.Life
	w     fileWatch
	counters
	// parallel is the number of reads ReadBatch keeps in flight, set at open.
	parallel int
}

// DefaultDirectParallel is the number of reads a Direct keeps in flight in
// a batch when OpenDirect is given 0.
const DefaultDirectParallel = 64

// Parallel is the number of reads a batch keeps in flight.
func (d *Direct) Parallel() int { return d.parallel }

const bounceSize = 64 << 10

// ownedRings is how many batches of one Direct run on rings of their own
// at once (one per core here); more share the reaped ring.
const ownedRings = 2

// OpenDirect opens path with O_DIRECT; a batch keeps up to parallel reads
// in flight (0: DefaultDirectParallel; negative is an error). It fails with
// an error naming the filesystem's refusal when O_DIRECT is not supported
// (e.g. tmpfs before Linux 6.6). Errors name the file as opts say (Named).
func OpenDirect(path string, parallel int, opts ...OpenOption) (*Direct, error) {
	if parallel < 0 {
		return nil, fmt.Errorf("%w: direct parallelism %d is negative", ErrBadOption, parallel)
	}
	h, err := OpenHandle(path, opts...)
	if err != nil {
		return nil, err
	}
	return NewDirect(h, parallel)
}

// NewDirect is OpenDirect of the file h holds: its open file is switched
// to O_DIRECT. It takes h over (closed on failure).
func NewDirect(h *Handle, parallel int) (*Direct, error) {
	f, id, err := h.take()
	if err != nil {
		return nil, err
	}
	path, name := h.path, h.name
	// A descriptor of the Direct's own (the *os.File would close it when
	// collected); status flags belong to the open file, which nothing
	// else holds once f is closed.
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return nil, &os.PathError{Op: "dup", Path: name, Err: err}
	}
	if parallel < 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: direct parallelism %d is negative", ErrBadOption, parallel)
	}
	if parallel == 0 {
		parallel = DefaultDirectParallel
	}
	if err := setDirect(fd); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("the filesystem of %s refuses O_DIRECT (%v); use --backend pread or mmap", name, err)
		}
		return nil, &os.PathError{Op: "fcntl", Path: name, Err: err}
	}
	d := &Direct{fd: fd, name: name, size: id.size, align: 4096, memAlign: 4096, parallel: parallel}
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &sx); err == nil &&
		sx.Mask&unix.STATX_DIOALIGN != 0 && sx.Dio_offset_align > 0 {
		d.align, d.memAlign = int64(sx.Dio_offset_align), int64(max(sx.Dio_mem_align, 1))
	}
	if d.align > bounceSize || d.memAlign > 4096 {
		unix.Close(fd)
		return nil, fmt.Errorf("%s needs alignment %d/%d, more than supported", name, d.align, d.memAlign)
	}
	d.pool.New = func() any { b := alignedBuf(bounceSize, d.memAlign); return &b }
	d.ring, _ = newUring(256) // falls back to pread where io_uring is unavailable
	if d.ring != nil {
		d.owned = make(chan ownedRing, ownedRings)
		for range ownedRings {
			if o, err := newOwnedRing(uint32(min(parallel, 256))); err == nil {
				d.owned <- o
			}
		}
	}
	d.life.Free = func() error {
		d.w.stop()
		if d.ring != nil {
			d.ring.close()
			for len(d.owned) > 0 {
				(<-d.owned).close()
			}
		}
		return unix.Close(fd)
	}
	d.w.start(path, name, fd, &d.life, id)
	return d, nil
}

// setDirect turns O_DIRECT on for the open file fd refers to.
func setDirect(fd int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_DIRECT)
	return err
}

// UsesIOURing reports whether reads go through io_uring.
func (d *Direct) UsesIOURing() bool { return d.ring != nil }

// Alignment is the offset/length alignment the kernel asked for.
func (d *Direct) Alignment() int64 { return d.align }

// alignedBuf returns n bytes starting at a multiple of align.
func alignedBuf(n int, align int64) []byte {
	b := make([]byte, n+int(align))
	shift := int((align - int64(uintptr(unsafe.Pointer(&b[0])))%align) % align)
	return b[shift : shift+n : shift+n]
}

func (d *Direct) Size() int64 { return d.size }

// ReadAtContext reads p at off, counting the aligned reads it issues in t
// (when not nil). It gives up when ctx ends before a read is issued; a
// read issued is waited for (a local device answers, or fails, in bounded
// time).
func (d *Direct) ReadAtContext(ctx context.Context, p []byte, off int64, t *Tally) (int, error) {
	if !d.life.Acquire() {
		return 0, backendkit.Closed(d.name)
	}
	defer d.life.Release()
	d.request(len(p))
	if err := backendkit.CheckRange(d.name, off, int64(len(p)), d.size); err != nil {
		return 0, err
	}
	// Aligned caller buffer and range: read straight into it.
	if int64(len(p))%d.align == 0 && off%d.align == 0 && len(p) > 0 &&
		int64(uintptr(unsafe.Pointer(&p[0])))%d.memAlign == 0 {
		return d.pread(ctx, p, off, len(p), t)
	}
	bp := d.pool.Get().(*[]byte)
	defer d.pool.Put(bp)
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		start := pos - pos%d.align
		end := min(start+bounceSize, (off+int64(len(p))+d.align-1)/d.align*d.align)
		buf := (*bp)[:end-start]
		want := int(min(end, d.size) - start) // bytes that exist
		if _, err := d.pread(ctx, buf, start, want, t); err != nil {
			return done, err
		}
		done += copy(p[done:], buf[pos-start:want])
	}
	return done, nil
}

// pread reads into buf at the aligned offset off; at least want bytes must
// arrive (the file's end may make an aligned read short). It issues no
// read once ctx has ended.
func (d *Direct) pread(ctx context.Context, buf []byte, off int64, want int, t *Tally) (int, error) {
	got := 0
	for got < want {
		if err := Interrupted(ctx); err != nil {
			return got, d.givenUp(len(buf)-got, off+int64(got), err)
		}
		var n int
		var err error
		if d.ring != nil {
			if res := d.ring.read(d.fd, buf[got:], off+int64(got)); res >= 0 {
				n = int(res)
			} else {
				err = unix.Errno(-res)
			}
		} else {
			n, err = unix.Pread(d.fd, buf[got:], off+int64(got))
		}
		d.osRead(max(n, 0))
		if t != nil {
			t.DeviceReads++
			t.DeviceBytes += int64(max(n, 0))
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return got, d.w.explain(fmt.Errorf("%s: O_DIRECT read of %d bytes at offset %d: %w", d.name, len(buf)-got, off+int64(got), err))
		}
		if n == 0 {
			return got, d.w.explain(fmt.Errorf("%s: read at offset %d: %w", d.name, off+int64(got), io.ErrUnexpectedEOF))
		}
		got += n
		if int64(got)%d.align != 0 { // short read at end of file
			break
		}
	}
	if got < want {
		return got, d.w.explain(fmt.Errorf("%s: read at offset %d: %w", d.name, off+int64(got), io.ErrUnexpectedEOF))
	}
	return got, nil
}

// givenUp is the error of a read of n bytes at off not issued because
// its context ended with cause.
func (d *Direct) givenUp(n int, off int64, cause error) error {
	return fmt.Errorf("%s: read of %d bytes at offset %d given up: %w", d.name, n, off, cause)
}

// directBatch is one ReadBatch call's reusable state: the ring's requests
// and, for unaligned requests, an aligned bounce arena.
type directBatch struct {
	bufs  [][]byte
	offs  []int64
	res   []int32
	rs    []uringReq
	sem   chan struct{}
	done  chan int32 // completed request indices, from the ring's reaper
	arena []byte
}

// ReadBatch reads the requests with up to parallel reads in flight, all
// submitted to the ring from this goroutine. Aligned requests (offset,
// length and buffer) are read in place; the others read their covering
// aligned range into a pooled bounce arena and are copied out. Without
// io_uring, parallel goroutines issue reads. Once ctx ends no read is
// submitted: the requests not yet submitted fail, those in flight are
// waited for (the kernel owns their buffers until it answers).
func (d *Direct) ReadBatch(ctx context.Context, reqs []ReadReq) error {
	return d.ReadBatchEach(ctx, reqs, nil)
}

// ReadBatchEach is ReadBatch calling each(i), in the calling goroutine, as
// soon as request i is complete (its Buf filled, or its Err set), while
// later requests are still in flight: work on the first bytes to arrive
// overlaps the wait for the last. Every request gets one call, in
// completion order (request order without io_uring, after all complete).
func (d *Direct) ReadBatchEach(ctx context.Context, reqs []ReadReq, each func(i int)) error {
	if d.ring == nil {
		err := readBatchParallel(ctx, d, reqs, max(d.parallel, 1))
		if each != nil {
			for i := range reqs {
				each(i)
			}
		}
		return err
	}
	if !d.life.Acquire() {
		// Closed: no request is read, and each says so, as BatchReader's
		// contract asks (a caller may look only at its own requests).
		err := backendkit.Closed(d.name)
		for i := range reqs {
			reqs[i].Err = err
			if each != nil {
				each(i)
			}
		}
		return err
	}
	defer d.life.Release()
	b, _ := d.batches.Get().(*directBatch)
	if b == nil {
		b = &directBatch{}
	}
	defer d.batches.Put(b)
	n := len(reqs)
	if cap(b.res) < n {
		b.bufs, b.offs, b.res, b.rs = make([][]byte, n), make([]int64, n), make([]int32, n), make([]uringReq, n)
	}
	if cap(b.done) < n {
		b.done = make(chan int32, n)
	}
	b.bufs, b.offs, b.res, b.rs = b.bufs[:n], b.offs[:n], b.res[:n], b.rs[:n]
	var sem chan struct{} // nil: as many in flight as the ring holds
	if par := d.parallel; par > 0 && par < int(d.ring.entries) {
		if cap(b.sem) != par {
			b.sem = make(chan struct{}, par)
		}
		sem = b.sem
	}
	bounce := !d.aligned(reqs)
	if bounce {
		var total int64
		for i := range reqs {
			start, end := d.span(reqs[i])
			total += end - start
		}
		if int64(len(b.arena)) < total {
			b.arena = alignedBuf(int(total), d.memAlign)
		}
	}
	var at int64
	for i := range reqs {
		q := &reqs[i]
		d.request(len(q.Buf))
		if !bounce {
			b.bufs[i], b.offs[i] = q.Buf, q.Off
			continue
		}
		start, end := d.span(*q)
		b.bufs[i], b.offs[i] = b.arena[at:at+end-start:at+end-start], start
		at += end - start
	}
	var first error
	finish := func(i int) {
		q := &reqs[i]
		switch {
		case b.res[i] == resGivenUp:
			q.Err = d.givenUp(len(q.Buf), q.Off, context.Cause(ctx))
		case bounce:
			d.finishBounced(ctx, q, b.bufs[i], b.offs[i], int(b.res[i]))
		default:
			d.finishInPlace(ctx, q, int(b.res[i]))
		}
		if q.Err != nil && first == nil {
			first = q.Err
		}
		if each != nil {
			each(i)
		}
	}
	select {
	case o := <-d.owned:
		if o.readBatch(ctx, d.fd, b.bufs, b.offs, b.res, d.parallel, finish) {
			d.owned <- o
		} else {
			o.close() // refused to go on: later batches share the reaped ring
		}
	default:
		d.ring.readBatch(ctx, d.fd, b.bufs, b.offs, b.res, b.rs, sem, b.done, finish)
	}
	return first
}

// finishInPlace sets q.Err from the kernel's result n for q read straight
// into q.Buf, finishing a short read that stopped before the file's end.
func (d *Direct) finishInPlace(ctx context.Context, q *ReadReq, n int) {
	switch {
	case n < 0:
		q.Err = d.w.explain(fmt.Errorf("%s: O_DIRECT read of %d bytes at offset %d: %w", d.name, len(q.Buf), q.Off, unix.Errno(-n)))
	case n < len(q.Buf) && q.Off+int64(n) < d.size && n%int(d.align) == 0 && n > 0:
		// A short read before the end: finish it the ordinary way.
		_, q.Err = d.ReadAtContext(ctx, d.rest(q, n), q.Off+int64(n), nil)
	case n < len(q.Buf) && !(q.ToEOF && q.Off+int64(n) == d.size):
		q.Err = d.w.explain(fmt.Errorf("%s: read of %d bytes at offset %d runs past the end (file size %d): %w", d.name, len(q.Buf), q.Off, d.size, io.ErrUnexpectedEOF))
	}
	d.osRead(max(n, 0))
	q.IO.DeviceReads++
	q.IO.DeviceBytes += int64(max(n, 0))
}

// finishBounced copies q's part of its covering range buf (read at off,
// kernel result n) into q.Buf, or sets q.Err.
func (d *Direct) finishBounced(ctx context.Context, q *ReadReq, buf []byte, off int64, n int) {
	if n < 0 {
		q.Err = d.w.explain(fmt.Errorf("%s: O_DIRECT read of %d bytes at offset %d: %w", d.name, len(q.Buf), q.Off, unix.Errno(-n)))
		q.IO.DeviceReads++
		return
	}
	// The bytes that exist of q's range, then q's part of them.
	lead := int(q.Off - off)
	got := max(0, min(n-lead, len(q.Buf)))
	copy(q.Buf, buf[lead:lead+got])
	d.osRead(n)
	q.IO.DeviceReads++
	q.IO.DeviceBytes += int64(n)
	switch {
	case got == len(q.Buf), q.ToEOF && q.Off+int64(got) == d.size:
	case q.Off+int64(got) < d.size: // short before the end: finish it
		_, q.Err = d.ReadAtContext(ctx, d.rest(q, got), q.Off+int64(got), &q.IO)
	default:
		q.Err = d.w.explain(fmt.Errorf("%s: read of %d bytes at offset %d runs past the end (file size %d): %w", d.name, len(q.Buf), q.Off, d.size, io.ErrUnexpectedEOF))
	}
}

// rest is what is left to read of q once got bytes are in: the rest of
// q.Buf, up to the file's end for a ToEOF request.
func (d *Direct) rest(q *ReadReq, got int) []byte {
	r := q.Buf[got:]
	if q.ToEOF {
		r = r[:max(0, min(int64(len(r)), d.size-q.Off-int64(got)))]
	}
	return r
}

// span is the aligned range covering q (it may run past the file's end).
func (d *Direct) span(q ReadReq) (start, end int64) {
	start = q.Off - q.Off%d.align
	end = (q.Off + int64(len(q.Buf)) + d.align - 1) / d.align * d.align
	return start, end
}

func (d *Direct) aligned(reqs []ReadReq) bool {
	for _, q := range reqs {
		if len(q.Buf) == 0 || q.Off%d.align != 0 || int64(len(q.Buf))%d.align != 0 ||
			int64(uintptr(unsafe.Pointer(&q.Buf[0])))%d.memAlign != 0 || q.Off < 0 || q.Off >= d.size {
			return false
		}
	}
	return true
}

// AlignedBuffer returns n zeroed bytes aligned for this file's O_DIRECT reads.
func (d *Direct) AlignedBuffer(n int) []byte { return alignedBuf(n, max(d.memAlign, 4096)) }

func (d *Direct) Close() error { return d.life.Close(d.name) }

// Stats: ResidentBytes is not tracked for the pooled bounce buffers (64 KiB
// each, one per concurrent reader).
func (d *Direct) Stats() Stats { return d.snapshot() }

// CheckFile: see FileChecker.
func (d *Direct) CheckFile(context.Context) error { return d.w.checkFile() }

// CheckFD: see FileChecker.
func (d *Direct) CheckFD() error { return d.w.checkFD() }
