package partial

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A minimal io_uring (Linux ≥ 5.6) used by the direct backend: callers
// submit reads without blocking and one goroutine reaps completions, keeping
// up to `entries` reads in flight. Callers never block in a read system call,
// so with GOMAXPROCS=2 a hundred concurrent reads do not stall the Go
// scheduler (a goroutine blocked in pread holds its P until sysmon steals it:
// 28K reads/s at 64 in flight here, against 95K with GOMAXPROCS=64).
//
// Layout from linux/io_uring.h.

const (
	ioringOffSQRing   = 0
	ioringOffCQRing   = 0x8000000
	ioringOffSQEs     = 0x10000000
	ioringOpNop       = 0
	ioringOpRead      = 22
	ioringEnterGetEvt = 1
	ioringFeatSingle  = 1
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	rwFlags  uint32
	userData uint64
	bufIndex uint16
	person   uint16
	splice   int32
	addr3    uint64
	pad      uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// uringReq is one read; done receives when res is set.
type uringReq struct {
	buf   []byte
	res   int32
	done  chan struct{}
	batch chan int32    // batch requests send their index here instead
	idx   int32         // the request's index in its batch
	sem   chan struct{} // batch requests release their in-flight token here
}

var uringReqPool = sync.Pool{New: func() any { return &uringReq{done: make(chan struct{}, 1)} }}

const stopData = ^uint64(0) // user_data of the NOP that stops the reaper

// uring: callers fill and submit their own SQE under mu (a non-blocking
// io_uring_enter), so every read is in flight at once; one reaper goroutine
// waits for completions and wakes the callers. Slots bound the reads in
// flight to the ring size.
type uring struct {
	fd                   int
	sqMem, cqMem, sqMem2 []byte
	single               bool // SQ and CQ rings share one mapping
	sqHead, sqTail       *uint32
	sqMask               uint32
	sqArray              []uint32
	sqes                 []sqe
	cqHead, cqTail       *uint32
	cqMask               uint32
	cqes                 []cqe
	entries              uint32
	mu                   sync.Mutex
	queued               uint32 // SQEs written but not yet submitted (under mu)
	submitting           bool   // a caller is inside io_uring_enter (under mu)
	slots                []*uringReq
	free                 chan uint64
	stopped              chan struct{}
}

func newUring(entries uint32) (*uring, error) {
	u, err := setupUring(entries)
	if err != nil {
		return nil, err
	}
	u.slots = make([]*uringReq, u.entries)
	u.free = make(chan uint64, u.entries)
	for i := range u.entries {
		u.free <- uint64(i)
	}
	go u.reap()
	return u, nil
}

// setupUring sets up and maps a ring, with no reaper.
func setupUring(entries uint32) (*uring, error) {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	u := &uring{fd: int(fd), entries: p.sqEntries, stopped: make(chan struct{})}
	fail := func(err error) (*uring, error) { u.unmap(); unix.Close(u.fd); return nil, err }
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	if p.features&ioringFeatSingle != 0 {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if u.sqMem, err = unix.Mmap(u.fd, ioringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(fmt.Errorf("mmap io_uring sq: %w", err))
	}
	u.cqMem, u.single = u.sqMem, p.features&ioringFeatSingle != 0
	if !u.single {
		if u.cqMem, err = unix.Mmap(u.fd, ioringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			return fail(fmt.Errorf("mmap io_uring cq: %w", err))
		}
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(sqe{}))
	if u.sqMem2, err = unix.Mmap(u.fd, ioringOffSQEs, sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(fmt.Errorf("mmap io_uring sqes: %w", err))
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	u.sqHead, u.sqTail = u32(u.sqMem, p.sqOff.head), u32(u.sqMem, p.sqOff.tail)
	u.sqMask = *u32(u.sqMem, p.sqOff.ringMask)
	u.sqArray = unsafe.Slice(u32(u.sqMem, p.sqOff.array), p.sqEntries)
	u.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&u.sqMem2[0])), p.sqEntries)
	u.cqHead, u.cqTail = u32(u.cqMem, p.cqOff.head), u32(u.cqMem, p.cqOff.tail)
	u.cqMask = *u32(u.cqMem, p.cqOff.ringMask)
	u.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&u.cqMem[p.cqOff.cqes])), p.cqEntries)
	return u, nil
}

func (u *uring) unmap() {
	if u.sqMem2 != nil {
		unix.Munmap(u.sqMem2)
	}
	if u.cqMem != nil && !u.single {
		unix.Munmap(u.cqMem)
	}
	if u.sqMem != nil {
		unix.Munmap(u.sqMem)
	}
}

// read reads into buf at off from fd through the ring; it returns the
// kernel's result (bytes read, or -errno).
func (u *uring) read(fd int, buf []byte, off int64) int32 {
	slot := <-u.free
	r := uringReqPool.Get().(*uringReq)
	r.buf = buf
	if errno := u.submit(readSQE(fd, buf, off, slot), r, slot); errno != 0 {
		u.free <- slot
		uringReqPool.Put(r)
		return -int32(errno)
	}
	<-r.done
	res := r.res
	r.buf = nil
	uringReqPool.Put(r)
	return res
}

// submit queues one SQE and makes sure the kernel sees it without waiting
// for completions.
func (u *uring) submit(e sqe, r *uringReq, slot uint64) unix.Errno {
	u.queue(e, r, slot)
	return u.flush()
}

// queue writes one SQE into the ring without telling the kernel.
func (u *uring) queue(e sqe, r *uringReq, slot uint64) {
	u.mu.Lock()
	if slot != stopData {
		u.slots[slot] = r
	}
	u.push(e)
	u.queued++
	u.mu.Unlock()
}

// push writes e at the submission queue's tail; the caller owns the tail
// (under mu, or as an owned ring's one user).
func (u *uring) push(e sqe) {
	tail := atomic.LoadUint32(u.sqTail)
	idx := tail & u.sqMask
	u.sqes[idx] = e
	u.sqArray[idx] = idx
	atomic.StoreUint32(u.sqTail, tail+1)
}

// readSQE is a read of len(buf) bytes at off from fd into buf, tagged data.
func readSQE(fd int, buf []byte, off int64, data uint64) sqe {
	return sqe{opcode: ioringOpRead, fd: int32(fd), off: uint64(off),
		addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))), len: uint32(len(buf)), userData: data}
}

// flush hands every queued SQE to the kernel. Submissions coalesce: while
// one caller is inside io_uring_enter, others return at once and it
// submits their SQEs too.
func (u *uring) flush() unix.Errno {
	u.mu.Lock()
	if u.submitting || u.queued == 0 {
		u.mu.Unlock()
		return 0
	}
	u.submitting = true
	var errno unix.Errno
	for u.queued > 0 {
		n := u.queued
		u.queued = 0
		u.mu.Unlock()
		for {
			var got uintptr
			got, _, errno = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), uintptr(n), 0, 0, 0, 0)
			if errno == unix.EINTR || errno == unix.EAGAIN || errno == unix.EBUSY {
				continue
			}
			if errno == 0 && uint32(got) < n {
				n -= uint32(got) // the kernel took only part: submit the rest
				continue
			}
			break
		}
		u.mu.Lock()
		if errno != 0 {
			break
		}
	}
	u.submitting = false
	u.mu.Unlock()
	return errno
}

// readBatch reads every request through the ring, queueing up to 32 SQEs
// per system call, with at most cap(sem) reads outstanding (nil sem: the
// ring's size). It calls finish(i), in this goroutine, as soon as request
// i is complete (res[i] set to the kernel's result, or resGivenUp for a
// request not submitted because ctx ended), also while later requests wait
// for a token, and returns after the last. rs (len(bufs)) and done
// (capacity ≥ len(bufs)) are the caller's scratch.
func (u *uring) readBatch(ctx context.Context, fd int, bufs [][]byte, offs []int64, res []int32, rs []uringReq, sem chan struct{}, done chan int32, finish func(i int)) {
	clear(rs)
	finished, submitted := 0, len(bufs)
	handle := func(i int32) {
		res[i] = rs[i].res
		finish(int(i))
		finished++
	}
	for i := range bufs {
		if ctx.Err() != nil { // what is in flight completes; the rest is not sent
			submitted = i
			for j := i; j < len(bufs); j++ {
				res[j] = resGivenUp
				finish(j)
			}
			break
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			default:
				u.flush() // at the cap: make sure what is queued is running
				for acquired := false; !acquired; {
					select {
					case sem <- struct{}{}:
						acquired = true
					case j := <-done: // use the wait: finish what has arrived
						handle(j)
					}
				}
			}
			rs[i].sem = sem
		}
		var slot uint64
		select {
		case slot = <-u.free:
		default:
			u.flush() // the ring is full: let what is queued complete
			slot = <-u.free
		}
		r := &rs[i]
		r.buf, r.batch, r.idx = bufs[i], done, int32(i)
		u.queue(readSQE(fd, bufs[i], offs[i], slot), r, slot)
		if (i+1)%32 == 0 {
			if errno := u.flush(); errno != 0 {
				u.failQueued(-int32(errno))
			}
		}
	}
	if errno := u.flush(); errno != 0 {
		u.failQueued(-int32(errno))
	}
	for finished < submitted {
		handle(<-done)
	}
}

// failQueued completes every request still owned by the ring with res,
// after io_uring_enter itself failed (the ring is unusable).
func (u *uring) failQueued(res int32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, r := range u.slots {
		if r != nil {
			u.slots[i] = nil
			r.res = res
			u.complete(r)
			u.free <- uint64(i)
		}
	}
	u.queued = 0
}

func (u *uring) complete(r *uringReq) {
	if r.sem != nil {
		<-r.sem
	}
	if r.batch != nil {
		r.batch <- r.idx
	} else {
		r.done <- struct{}{}
	}
}

// close stops the reaper. Every read must have returned.
func (u *uring) close() error {
	if errno := u.submit(sqe{opcode: ioringOpNop, userData: stopData}, nil, stopData); errno == 0 {
		<-u.stopped
	}
	u.unmap()
	return unix.Close(u.fd)
}

// reap waits for completions and wakes their callers until the stop NOP.
func (u *uring) reap() {
	defer close(u.stopped)
	for {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), 0, 1, ioringEnterGetEvt, 0, 0)
		if errno != 0 && errno != unix.EINTR && errno != unix.EAGAIN && errno != unix.EBUSY {
			return // the ring is gone
		}
		head := atomic.LoadUint32(u.cqHead)
		tail := atomic.LoadUint32(u.cqTail)
		stop := false
		for ; head != tail; head++ {
			c := u.cqes[head&u.cqMask]
			if c.userData == stopData {
				stop = true
				continue
			}
			u.mu.Lock()
			r := u.slots[c.userData]
			u.slots[c.userData] = nil
			u.mu.Unlock()
			if r == nil { // failed by failQueued already
				continue
			}
			r.res = c.res
			u.complete(r)
			u.free <- c.userData
		}
		atomic.StoreUint32(u.cqHead, head)
		if stop {
			return
		}
	}
}

// ownedRing is a ring with no reaper, used by one batch at a time: its
// owner submits the reads and waits for their completions in the same
// io_uring_enter, and reaps them itself. With one query in flight, a
// batch on the shared ring paid a wake-up of the reaper's thread for each
// completion, a channel send to the batch's goroutine and that
// goroutine's wake-up; here the whole batch is, when it fits the
// parallelism, one system call.
type ownedRing struct{ *uring }

func newOwnedRing(entries uint32) (ownedRing, error) {
	u, err := setupUring(entries)
	return ownedRing{u}, err
}

// readBatch reads bufs[i] at offs[i] from fd, at most par in flight,
// setting res[i] to the kernel's result (bytes read, or -errno) and
// calling finish(i) as each completes. Once ctx ends it submits no more:
// the requests left get resGivenUp, those in flight are waited for. It
// reports false when the ring refused to go on (every read not answered
// failed): it must not be used again.
func (o ownedRing) readBatch(ctx context.Context, fd int, bufs [][]byte, offs []int64, res []int32, par int, finish func(i int)) bool {
	u := o.uring
	n := len(bufs)
	par = max(1, min(par, int(u.entries)))
	next, pending, running, done := 0, 0, 0, 0 // pending: in the ring, not yet taken by the kernel
	fail := func(i int, errno unix.Errno) { res[i] = -int32(errno); finish(i); done++ }
	for done < n {
		if next < n && ctx.Err() != nil {
			for ; next < n; next++ {
				res[next] = resGivenUp
				finish(next)
				done++
			}
			if running+pending == 0 {
				break
			}
		}
		for ; next < n && pending+running < par; next++ {
			u.push(readSQE(fd, bufs[next], offs[next], uint64(next)))
			res[next] = resInFlight
			pending++
		}
		wait := min(running+pending, 1)
		if next == n {
			wait = running + pending // all queued: wait for the last
		}
		head := atomic.LoadUint32(u.sqHead)
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), uintptr(pending), uintptr(wait), ioringEnterGetEvt, 0, 0)
		taken := int(atomic.LoadUint32(u.sqHead) - head) // the kernel's word, whatever enter returned
		pending -= taken
		running += taken
		cqHead, cqTail := atomic.LoadUint32(u.cqHead), atomic.LoadUint32(u.cqTail)
		for ; cqHead != cqTail; cqHead++ {
			c := u.cqes[cqHead&u.cqMask]
			res[c.userData] = c.res
			running--
			done++
			finish(int(c.userData))
		}
		atomic.StoreUint32(u.cqHead, cqHead)
		switch errno {
		case 0, unix.EINTR, unix.EAGAIN, unix.EBUSY: // interrupted or short of resources: go on
			continue
		}
		// The ring refuses work: what it did not take fails, and so does
		// what is not yet queued.
		if pending > 0 {
			atomic.StoreUint32(u.sqTail, atomic.LoadUint32(u.sqHead))
			for i := next - pending; i < next; i++ {
				fail(i, errno)
			}
			pending = 0
		}
		for ; next < n; next++ {
			fail(next, errno)
		}
		if running == 0 || taken == 0 {
			// Nothing left to wait for, or a ring that answers for nothing
			// it took: give up on what it has not answered rather than
			// wait on it, and on the ring.
			for i := range next {
				if res[i] == resInFlight {
					fail(i, errno)
				}
			}
			return false
		}
	}
	return true
}

// resInFlight marks, in ownedRing.readBatch's results, a read the kernel
// has not answered; resGivenUp, in both rings' results, a read not
// submitted because its batch's context ended.
const (
	resInFlight = math.MinInt32
	resGivenUp  = math.MinInt32 + 1
)

// close releases the ring (no read may be in flight).
func (o ownedRing) close() error {
	o.unmap()
	return unix.Close(o.fd)
}
