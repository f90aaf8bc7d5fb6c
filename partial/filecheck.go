package partial

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// ErrFileChanged marks a file that changed after it was opened: truncated,
// overwritten, or replaced at its path. Every such error wraps it and names
// the file and what changed. A storage that has seen its file change stays
// changed: every later check (and query) fails with the same error, until
// the file is opened again.
var ErrFileChanged = errors.New("file changed")

// FileChecker is implemented by storages that read a file as it is on disk
// (Mmap, File, Direct, zstd.File, and blockcache.Cached when what it wraps does), and
// by Memory, whose private copy never changes (its checks return nil).
//
// Both checks compare the file with its identity recorded at open: device,
// inode, size, mtime and ctime (nanoseconds). Once a change is seen it is
// sticky.
type FileChecker interface {
	// CheckFile compares fstat of the open descriptor and stat of the path
	// (which catches a file replaced by rename: the descriptor still reads
	// the old one) with the identity at open. For watchers and status
	// requests, about once a second. A check that asks a remote store (an
	// object's HEAD) gives up when ctx ends.
	CheckFile(ctx context.Context) error
	// CheckFD is the per-query check: it proves that no byte read through
	// the storage before the call came from a version of the file other
	// than the one opened. It never allocates, and costs one atomic load
	// while the storage holds a lease on the file (see SetFileLeases), one
	// fstat otherwise; it does not look at the path.
	CheckFD() error
}

// Why one fstat after a query proves its bytes are of one version: the
// kernel updates a file's mtime (and ctime) before it copies a write's data
// into the page cache (file_modified, then the copy), and a truncation
// changes the size before it drops pages. So a byte of a newer version
// read during a query was written after that update: an fstat that starts
// after the query's last read and still matches the identity at open
// proves there was no such byte, nor a truncation. The same holds for bytes
// cached by an earlier query: they were read before the fstat too.
// Caveats: a file system with coarse timestamps (mtime in jiffies, without
// Linux 6.13's multigrain timestamps, which ext4, xfs, btrfs and tmpfs
// have) may give a write the mtime the file already had, if it lands in
// the same tick as the write the identity recorded — a file still being
// written when it was opened; and a process writing through its own shared
// writable mapping updates mtime only on its first write to a page after
// writeback, so later stores to that page go unseen until the next one.
//
// A read lease (Linux F_SETLEASE, F_RDLCK) makes the per-query check an
// atomic load: no process can open the file for writing, or truncate it,
// before the kernel has told the lease holder (SIGIO) and the holder has
// given the lease up, and the holder gives it up only after switching the
// storage to the fstat check. A query whose final load still sees the lease
// read only bytes that existed before any writer could write.

// fileID is what a file was when it was opened.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

// change says in words how now differs from was, e.g. "truncated from
// 197000000 to 0 bytes"; diff gives the numbers, for the server's log.
func (was fileID) change(now fileID) string {
	switch {
	case was.dev != now.dev || was.ino != now.ino:
		return "replaced by another file"
	case now.size < was.size:
		return fmt.Sprintf("truncated from %d to %d bytes", was.size, now.size)
	case now.size > was.size:
		return fmt.Sprintf("grown from %d to %d bytes", was.size, now.size)
	case was.mtime != now.mtime:
		return "modified in place"
	}
	return "its permissions, owner or links changed"
}

// diff describes how now differs from was, e.g. "size 197000000 -> 0".
func (was fileID) diff(now fileID) string {
	var parts []string
	if was.dev != now.dev || was.ino != now.ino {
		parts = append(parts, fmt.Sprintf("inode %d:%d -> %d:%d", was.dev, was.ino, now.dev, now.ino))
	}
	if was.size != now.size {
		parts = append(parts, fmt.Sprintf("size %d -> %d", was.size, now.size))
	}
	if was.mtime != now.mtime {
		parts = append(parts, "mtime "+stamp(was.mtime)+" -> "+stamp(now.mtime))
	}
	if was.ctime != now.ctime {
		parts = append(parts, "ctime "+stamp(was.ctime)+" -> "+stamp(now.ctime))
	}
	return strings.Join(parts, ", ")
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// fileChangedError is the sticky error of a changed file: what changed,
// in words, and the numbers (device:inode, times) that show it, which a
// client has no use for and the server's log keeps (ChangeDetail).
type fileChangedError struct{ path, what, detail string }

// ChangeDetail is the numbers behind an ErrFileChanged error of a local
// file (device and inode, size, mtime, ctime before and after), for the
// server's log; "" when err has none.
func ChangeDetail(err error) string {
	var e *fileChangedError
	if errors.As(err, &e) {
		return e.detail
	}
	return ""
}

func (e *fileChangedError) Error() string {
	return ErrFileChanged.Error() + ": " + e.path + ": " + e.what
}

func (e *fileChangedError) Unwrap() error { return ErrFileChanged }

// fileWatch checks one open file against its identity at open. The owner's
// life guards the descriptor: it is used only between acquire and release.
type fileWatch struct {
	path    string // what is checked
	name    string // what errors call it (Named)
	fd      int
	life    *backendkit.Life
	open    fileID
	changed atomic.Pointer[fileChangedError]
	leased  atomic.Bool // a read lease stands: no writer has opened the file since
	mu      sync.Mutex  // taking and giving up the lease
}

// start begins watching the file at path, open as fd, whose identity at
// open is id, taking a lease on it where it can; errors call it name.
func (w *fileWatch) start(path, name string, fd int, l *backendkit.Life, id fileID) {
	w.path, w.name, w.fd, w.life, w.open = path, name, fd, l, id
	if w.lease() {
		// A write between the stat at open and the lease went unannounced.
		w.fstatCheck()
	}
}

// stop ends the watch; the owner's free calls it before closing fd.
func (w *fileWatch) stop() { w.unlease() }

func (w *fileWatch) checkFD() error {
	if e := w.changed.Load(); e != nil {
		return e
	}
	if w.leased.Load() {
		return nil
	}
	return w.fstatCheck()
}

// fstatCheck compares fstat of the descriptor with the identity at open.
func (w *fileWatch) fstatCheck() error {
	if !w.life.Acquire() {
		if e := w.changed.Load(); e != nil {
			return e
		}
		return backendkit.Closed(w.name)
	}
	id, err := fstatID(w.fd)
	w.life.Release()
	if err != nil {
		return fmt.Errorf("%s: fstat: %w", w.name, err)
	}
	if id != w.open {
		return w.mark(w.open.change(id)+" since it was opened", w.open.diff(id))
	}
	if e := w.changed.Load(); e != nil {
		return e
	}
	return nil
}

// checkFile compares fstat of the descriptor (even under a lease) and
// stat of the path with the identity at open; a path that names no file,
// or another one, is reported as such rather than by the ctime its
// unlinking gave the open file.
func (w *fileWatch) checkFile() error {
	if e := w.changed.Load(); e != nil {
		return e
	}
	w.verifyLease()
	if !w.life.Acquire() {
		return backendkit.Closed(w.name)
	}
	fid, ferr := fstatID(w.fd)
	w.life.Release()
	pid, perr := statID(w.path)
	switch {
	case ferr != nil:
		return fmt.Errorf("%s: fstat: %w", w.name, ferr)
	case errors.Is(perr, errNoFile):
		return w.mark("the path no longer names a file (removed or renamed away) since it was opened", "")
	case perr == nil && (pid.dev != w.open.dev || pid.ino != w.open.ino):
		return w.mark("replaced: the path names another file now, since it was opened", w.open.diff(pid))
	case fid != w.open:
		return w.mark(w.open.change(fid)+" since it was opened", w.open.diff(fid))
	case perr != nil:
		return fmt.Errorf("%s: stat: %w", w.name, perr)
	case pid != w.open:
		return w.mark(w.open.change(pid)+" since it was opened", w.open.diff(pid))
	}
	return nil
}

// mark records the change (the first one seen stays) and returns the
// sticky error; detail is for the log.
func (w *fileWatch) mark(what, detail string) error {
	w.changed.CompareAndSwap(nil, &fileChangedError{path: w.name, what: what, detail: detail})
	return w.changed.Load()
}

// explain returns the change behind a failed read (a short read, an
// unexpected EOF, an I/O error), when a check finds one; err otherwise.
func (w *fileWatch) explain(err error) error {
	if cerr := w.checkFile(); errors.Is(cerr, ErrFileChanged) {
		return cerr
	}
	return err
}

// fault records a memory fault at addr, offset off of the file's mapping,
// as a change: the one a check finds, or the fault itself (the file no
// longer covers the page, or its device failed).
func (w *fileWatch) fault(addr uintptr, off int64) error {
	if cerr := w.checkFile(); errors.Is(cerr, ErrFileChanged) {
		return cerr
	}
	return w.mark(fmt.Sprintf("reading it at offset %d failed: the file no longer covers it (truncated), or its device failed", off),
		fmt.Sprintf("memory fault at address %#x", addr))
}

// CheckFile: see FileChecker.
func (p *File) CheckFile(context.Context) error { return p.w.checkFile() }

// CheckFD: see FileChecker.
func (p *File) CheckFD() error { return p.w.checkFD() }

// CheckFile: see FileChecker.
func (m *Mmap) CheckFile(context.Context) error { return m.w.checkFile() }

// CheckFD: see FileChecker.
func (m *Mmap) CheckFD() error { return m.w.checkFD() }

// CheckFile is nil: a Memory's bytes are a private copy of one version.
func (m *Memory) CheckFile(context.Context) error { return nil }

// CheckFD is nil, as CheckFile.
func (m *Memory) CheckFD() error { return nil }

// FaultError turns r, a value recovered from a panic, into an error when r
// is a memory fault inside a file mapping s reads through (a query reading
// a mapped file that was truncated, or whose device failed, faults; with
// runtime/debug.SetPanicOnFault set the fault panics with a runtime.Error
// whose Addr is the faulting address). The error wraps ErrFileChanged and
// names the file and what changed, and s stays marked changed. ok is false
// for any other value, which the caller should panic with again.
//
// RecoverFault wraps it for the usual case.
func FaultError(s Storage, r any) (err error, ok bool) {
	re, isRT := r.(runtime.Error)
	fa, hasAddr := r.(interface{ Addr() uintptr })
	if !isRT || !hasAddr || re == nil {
		return nil, false
	}
	m := mmapOf(s)
	if m == nil || len(m.data) == 0 {
		return nil, false
	}
	addr := fa.Addr()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m.data)))
	if addr < base || addr-base >= uintptr(len(m.data)) {
		return nil, false
	}
	return m.w.fault(addr, int64(addr-base)), true
}

// RecoverFault, deferred with the value debug.SetPanicOnFault(true)
// returned, restores that setting and turns a fault inside s's mapping into
// *err (FaultError); any other panic goes on. Use it around code that
// touches mapped bytes (views of an Mmap), in the goroutine that touches
// them:
//
//	defer partial.RecoverFault(s, debug.SetPanicOnFault(true), &err)
func RecoverFault(s Storage, prev bool, err *error) {
	debug.SetPanicOnFault(prev)
	if r := recover(); r != nil {
		ferr, ok := FaultError(s, r)
		if !ok {
			panic(r)
		}
		*err = ferr
	}
}

// mmapOf is the mapping s reads through, if any.
func mmapOf(s Storage) *Mmap {
	switch v := s.(type) {
	case *Mmap:
		return v
	case interface{ Inner() Storage }: // a block cache in front
		return mmapOf(v.Inner())
	}
	return nil
}
