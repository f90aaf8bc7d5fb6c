package partial

import (
	"os"
	"os/signal"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Leases: see FileChecker.CheckFD and the comment after it.

var leaseOff atomic.Bool

// SetFileLeases turns read leases on (the default) or off for files opened
// from now on, and returns the previous setting. With a lease, the
// per-query file check (FileChecker.CheckFD) is one atomic load instead of
// an fstat, a system call per query that a small index's search notices.
//
// A lease is taken where the kernel grants one: the process owns the file
// or has CAP_LEASE, the file system supports leases (local ones do, NFS
// does not) and nobody has the file open for writing; elsewhere the check
// is the fstat. The process then receives SIGIO when another process opens
// the file for writing or truncates it (this package handles SIGIO with
// os/signal: a program must not ignore it), and that writer waits until
// the storage has switched to the fstat check and given the lease up, a
// matter of microseconds (at most /proc/sys/fs/lease-break-time, 45 s by
// default, if the process is stopped). A writer that opens the file with
// O_NONBLOCK does not wait: its open fails once with EAGAIN ("Resource
// temporarily unavailable"; coreutils truncate does this) and succeeds
// when retried, the lease being given up by then. Turn leases off where
// that matters more than the check's cost.
func SetFileLeases(on bool) (prev bool) { return !leaseOff.Swap(!on) }

var leases struct {
	once sync.Once
	mu   sync.Mutex
	set  map[*fileWatch]struct{}
}

// lease takes a read lease on w's file, reporting whether it did.
func (w *fileWatch) lease() bool {
	if leaseOff.Load() {
		return false
	}
	leases.once.Do(func() {
		leases.set = map[*fileWatch]struct{}{}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, unix.SIGIO)
		go leaseBreaks(ch)
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	// Registered first: a break right after the lease is taken finds it.
	leases.mu.Lock()
	leases.set[w] = struct{}{}
	leases.mu.Unlock()
	if _, err := unix.FcntlInt(uintptr(w.fd), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		leases.mu.Lock()
		delete(leases.set, w)
		leases.mu.Unlock()
		return false
	}
	w.leased.Store(true)
	return true
}

// unlease forgets w (the descriptor is about to close, which ends the
// lease).
func (w *fileWatch) unlease() {
	w.leased.Store(false)
	leases.mu.Lock()
	delete(leases.set, w)
	leases.mu.Unlock()
}

// verifyLease switches w to the fstat check if its lease is gone without
// a break seen (SIGIO lost, or a break that timed out); CheckFile calls it.
func (w *fileWatch) verifyLease() {
	if !w.leased.Load() || !w.life.Acquire() {
		return
	}
	defer w.life.Release()
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, err := unix.FcntlInt(uintptr(w.fd), unix.F_GETLEASE, 0); err != nil || t != unix.F_RDLCK {
		w.leased.Store(false)
		unix.FcntlInt(uintptr(w.fd), unix.F_SETLEASE, unix.F_UNLCK)
	}
}

// leaseBreaks answers lease breaks: on each SIGIO every leased file is
// asked for its lease (F_GETLEASE reports F_UNLCK once a break is pending),
// and a broken one switches to the fstat check before it gives the lease
// up, letting the writer go on.
func leaseBreaks(ch chan os.Signal) {
	var ws, broken []*fileWatch
	for range ch {
		ws = ws[:0]
		leases.mu.Lock()
		for w := range leases.set {
			ws = append(ws, w)
		}
		leases.mu.Unlock()
		broken = broken[:0]
		for _, w := range ws {
			if !w.life.Acquire() {
				continue // closing: its descriptor, and with it the lease, goes
			}
			w.mu.Lock()
			if t, err := unix.FcntlInt(uintptr(w.fd), unix.F_GETLEASE, 0); err != nil || t != unix.F_RDLCK {
				w.leased.Store(false) // from now on every check fstats
				unix.FcntlInt(uintptr(w.fd), unix.F_SETLEASE, unix.F_UNLCK)
				broken = append(broken, w)
			}
			w.mu.Unlock()
			w.life.Release()
		}
		leases.mu.Lock()
		for _, w := range broken {
			delete(leases.set, w)
		}
		leases.mu.Unlock()
	}
}
