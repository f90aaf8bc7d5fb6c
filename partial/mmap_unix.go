//go:build unix

package partial

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// Mmap maps a file read-only with MADV_RANDOM: with the default advice a
// fault on a cold file reads the device's whole read-ahead (often
// megabytes) per 4 KiB page touched (docs/design.md, "Storage
// backends"). It implements Storage, Viewer and StatsReporter; Close
// unmaps only when no reader or Acquire is outstanding.
type Mmap struct {
	region
	dev, ino uint64 // the mapped file's identity, checked before Populate drops its pages
	w        fileWatch
}

// OpenMmap maps the file at path; errors name it as opts say (Named).
func OpenMmap(path string, opts ...OpenOption) (*Mmap, error) {
	h, err := OpenHandle(path, opts...)
	if err != nil {
		return nil, err
	}
	return NewMmap(h)
}

// NewMmap maps the file h holds; it takes h over (closed on failure).
func NewMmap(h *Handle) (*Mmap, error) {
	f, id, err := h.take()
	if err != nil {
		return nil, err
	}
	adviseNormal(f)
	path, name := h.path, h.name
	m := &Mmap{region: region{name: name}, dev: id.dev, ino: id.ino}
	if size := id.size; size > 0 {
		m.data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("mmap %s: %w", name, err)
		}
		if err := unix.Madvise(m.data, unix.MADV_RANDOM); err != nil {
			unix.Munmap(m.data)
			f.Close()
			return nil, fmt.Errorf("madvise %s: %w", name, err)
		}
	}
	// The descriptor stays open for the file checks (CheckFD's fstat).
	data := m.data
	m.life.Free = func() error {
		m.w.stop()
		err := f.Close()
		if data != nil {
			if e := unix.Munmap(data); e != nil {
				err = e
			}
		}
		return err
	}
	m.w.start(path, name, int(f.Fd()), &m.life, id)
	return m, nil
}

// ReadAtContext copies from the mapping (ctx and t are ignored, as for
// Memory); a fault there (the file was truncated) is an error wrapping
// ErrFileChanged, not a crash.
func (m *Mmap) ReadAtContext(ctx context.Context, p []byte, off int64, t *Tally) (n int, err error) {
	prev := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(prev)
		if r := recover(); r != nil {
			ferr, ok := FaultError(m, r)
			if !ok {
				panic(r)
			}
			n, err = 0, ferr
		}
	}()
	return m.region.ReadAtContext(ctx, p, off, t)
}

// WillNeed asks the kernel to read the pages of [off, off+n) ahead
// (MADV_WILLNEED), for warm-up and batched reads.
func (m *Mmap) WillNeed(off, n int64) error {
	return m.withPages(off, n, func(span []byte, _ int64) error {
		return unix.Madvise(span, unix.MADV_WILLNEED)
	})
}

// withPages calls fn with the mapped pages that hold [off, off+n) and the
// file offset of the first, while holding the mapping; nothing for n = 0.
func (m *Mmap) withPages(off, n int64, fn func(span []byte, start int64) error) error {
	if !m.life.Acquire() {
		return backendkit.Closed(m.name)
	}
	defer m.life.Release()
	if err := backendkit.CheckRange(m.name, off, n, int64(len(m.data))); err != nil || n == 0 {
		return err
	}
	start := off &^ (int64(os.Getpagesize()) - 1)
	return fn(m.data[start:off+n], start)
}

// Stats reports requests; page faults are the kernel's, so BytesRead and
// ResidentBytes stay 0 (the mapping lives in the page cache, not the heap).
func (m *Mmap) Stats() Stats { return m.snapshot() }
