package offheap

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages (best effort: THP may be off).
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }

// Populate has the system back the pages of p (page-aligned, inside a
// mapping) now, without changing their bytes, so that a later first write
// does not fault. false where the kernel cannot (before Linux 5.14).
func Populate(p []byte) bool {
	return len(p) == 0 || unix.Madvise(p, unix.MADV_POPULATE_WRITE) == nil
}
