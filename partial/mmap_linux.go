package partial

import (
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
//  1. the range is advised MADV_HUGEPAGE, so page faults in it read the
//     file into 2 MiB page-cache folios, each mapped by one TLB entry;
//  2. its cached pages that no process maps are dropped first
//     (POSIX_FADV_DONTNEED; they are clean file pages): pages already cached
//     in 4 KiB folios would otherwise be mapped as they are;
//  3. MADV_POPULATE_READ faults the whole range in.
//
// On a warm 62 MiB index this measured 10–20% faster searches than the same
// pages mapped 4 KiB at a time. The range keeps MADV_HUGEPAGE: should the
// kernel evict it, a fault reads 2 MiB back, which suits an index its
// operator asked to keep warm. Kernels without file huge pages or without
// MADV_POPULATE_READ (before 5.14) fall back to MADV_WILLNEED.
func (m *Mmap) Populate(off, n int64) error {
	return m.withPages(off, n, func(r []byte, start int64) error {
		end := off + n
		if hs, he := (start+hugePage-1)&^(hugePage-1), end&^(hugePage-1); hs < he {
			if err := unix.Madvise(m.data[hs:he], unix.MADV_HUGEPAGE); err == nil {
				m.dropCached(hs, he-hs)
			}
		}
		if err := unix.Madvise(r, unix.MADV_POPULATE_READ); err != nil {
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
