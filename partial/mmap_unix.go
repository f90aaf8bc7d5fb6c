//go:build unix

package partial

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Mmap maps a file read-only with MADV_RANDOM: on this machine default
// read-ahead pulls megabytes per 4 KiB page touched on a cold file
// (io-notes.md). It implements Storage, Viewer and StatsReporter; Close
// unmaps only when no reader or Acquire is outstanding.
type Mmap struct {
	region
	dev, ino uint64 // the mapped file's identity, checked before Populate drops its pages
}

// OpenMmap maps the file at path.
func OpenMmap(path string) (*Mmap, error) {
	f, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := &Mmap{region: region{name: path}}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err == nil {
		m.dev, m.ino = uint64(st.Dev), uint64(st.Ino)
	}
	if size > 0 {
		m.data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("partial: mmap %s: %w", path, err)
		}
		if err := unix.Madvise(m.data, unix.MADV_RANDOM); err != nil {
			unix.Munmap(m.data)
			return nil, fmt.Errorf("partial: madvise %s: %w", path, err)
		}
	}
	data := m.data
	m.life.free = func() error {
		if data == nil {
			return nil
		}
		return unix.Munmap(data)
	}
	return m, nil
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
	if !m.life.acquire() {
		return closedErr(m.name)
	}
	defer m.life.release()
	if err := rangeCheck(m.name, off, n, int64(len(m.data))); err != nil || n == 0 {
		return err
	}
	start := off &^ (int64(os.Getpagesize()) - 1)
	return fn(m.data[start:off+n], start)
}

// Stats reports requests; page faults are the kernel's, so BytesRead and
// ResidentBytes stay 0 (the mapping lives in the page cache, not the heap).
func (m *Mmap) Stats() Stats { return m.snapshot() }
