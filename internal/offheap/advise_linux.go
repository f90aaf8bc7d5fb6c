package offheap

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages (best effort: THP may be off).
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
