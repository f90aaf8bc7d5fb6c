package partial

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on amd64 and arm64 (4 KiB
// base pages).
const hugePage = 2 << 20

// Warm (Warmer) makes [off, off+n) resident and mapped before it returns, on
// 2 MiB pages where the kernel can (warm-up: they spare a warm index's
// searches most TLB misses, docs/design.md). It advises MADV_HUGEPAGE over every
// whole 2 MiB region the range touches (rounded out, since sections start
// and end mid-region; not one the file's end cuts short), unmaps this
// mapping's pages there and drops the file's unmapped cached pages, which a
// parse's small reads left in 4 KiB folios that would otherwise be mapped
// as they are, then faults the range in with MADV_POPULATE_READ
// (MADV_WILLNEED where the kernel lacks it, before 5.14). The regions keep
// the advice: an evicted region reads 2 MiB back, which suits an index kept
// warm. Readers may run meanwhile (an unmapped page faults back in). A
// range the file no longer covers fails with an error wrapping
// ErrFileChanged. It gives up when ctx ends, between steps of populateStep
// bytes.
func (m *Mmap) Warm(ctx context.Context, off, n int64) error {
	return m.withPages(off, n, func(r []byte, start int64) error {
		if err := Interrupted(ctx); err != nil {
			return fmt.Errorf("%s: warm-up given up: %w", m.name, err)
		}
		hs := start &^ (hugePage - 1)
		he := (off + n + hugePage - 1) &^ (hugePage - 1)
		if size := int64(len(m.data)); he > size {
			he = size &^ (hugePage - 1)
		}
		if hs < he {
			if span := m.data[hs:he]; unix.Madvise(span, unix.MADV_HUGEPAGE) == nil {
				_ = unix.Madvise(span, unix.MADV_DONTNEED)
				m.dropCached(hs, he-hs)
			}
		}
		var err error
		for at := 0; at < len(r) && err == nil; at += populateStep {
			if at > 0 {
				if cerr := Interrupted(ctx); cerr != nil {
					return fmt.Errorf("%s: warm-up given up: %w", m.name, cerr)
				}
			}
			err = unix.Madvise(r[at:min(len(r), at+populateStep)], unix.MADV_POPULATE_READ)
		}
		switch err {
		case nil:
		case unix.EFAULT, unix.EIO, unix.EHWPOISON:
			// A page would have faulted (SIGBUS): the file no longer
			// covers it, or its device failed.
			if cerr := m.w.checkFile(); errors.Is(cerr, ErrFileChanged) {
				return cerr
			}
			return m.w.mark(fmt.Sprintf("populating its mapping at offsets [%d, %d): %v: the file no longer covers it, or its device failed", start, off+n, err), "")
		default:
			if err := unix.Madvise(r, unix.MADV_WILLNEED); err != nil {
				return fmt.Errorf("madvise %s: %w", m.name, err)
			}
		}
		return nil
	})
}

// populateStep is how much of a warm-up one MADV_POPULATE_READ faults in
// before the warm-up looks at its context again.
const populateStep = 64 << 20

// dropCached drops the file's cached pages in [off, off+n) that no process
// maps (POSIX_FADV_DONTNEED), if the path still names the mapped file.
func (m *Mmap) dropCached(off, n int64) {
	f, err := os.Open(m.name)
	if err != nil {
		return
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) == nil && uint64(st.Dev) == m.dev && uint64(st.Ino) == m.ino {
		_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
	}
}
