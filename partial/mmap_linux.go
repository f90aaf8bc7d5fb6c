package partial

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on amd64 and arm64 (4 KiB
// base pages).
const hugePage = 2 << 20

// Populate makes [off, off+n) resident and mapped before it returns, on
// 2 MiB pages where the kernel can, for warm-up:
//
//  1. the 2 MiB regions the range touches, from the one holding its first
//     byte to the one holding its last (but not one the file's end cuts
//     short), are advised MADV_HUGEPAGE, so page faults there read the file
//     into 2 MiB page-cache folios, each mapped by one TLB entry;
//  2. this mapping's pages in those regions are unmapped (MADV_DONTNEED:
//     the file keeps its bytes) and the file's cached pages there that no
//     process maps are dropped (POSIX_FADV_DONTNEED; they are clean file
//     pages): pages cached in 4 KiB folios, say by a parse's small reads,
//     would otherwise be mapped as they are;
//  3. MADV_POPULATE_READ faults the range in.
//
// Rounding out to whole regions matters because sections start and end
// mid-region: before, the edge regions of a 100k-node graph's neighbor
// lists (a fifth of them) stayed on 4 KiB pages. On a warm 62 MiB index
// 2 MiB pages measured 10–20% faster searches than 4 KiB ones. The regions
// keep MADV_HUGEPAGE: should the kernel evict them, a fault reads 2 MiB
// back, which suits an index its operator asked to keep warm. Readers of
// the mapping may run meanwhile: an unmapped page faults back in. Kernels
// without file huge pages or without MADV_POPULATE_READ (before 5.14) fall
// back to MADV_WILLNEED. A range the file no longer covers (it was
// truncated) fails with an error wrapping ErrFileChanged.
func (m *Mmap) Populate(off, n int64) error {
	return m.withPages(off, n, func(r []byte, start int64) error {
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
		switch err := unix.Madvise(r, unix.MADV_POPULATE_READ); err {
		case nil:
		case unix.EFAULT, unix.EIO, unix.EHWPOISON:
			// A page would have faulted (SIGBUS): the file no longer
			// covers it, or its device failed.
			if cerr := m.w.checkFile(); errors.Is(cerr, ErrFileChanged) {
				return cerr
			}
			return m.w.mark(fmt.Sprintf("populating its mapping at offsets [%d, %d): %v: the file no longer covers it, or its device failed", start, off+n, err))
		default:
			if err := unix.Madvise(r, unix.MADV_WILLNEED); err != nil {
				return fmt.Errorf("partial: madvise %s: %w", m.name, err)
			}
		}
		return nil
	})
}

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
