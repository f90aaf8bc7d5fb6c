package quant

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCache asks the kernel to drop f's clean pages from the page cache
// (POSIX_FADV_DONTNEED): a loaded guide is held in its own memory, and
// its file's pages would count a second time against a memory limit
// until reclaimed.
func dropCache(f *os.File) { dropRange(f, 0, 0) }

// dropRange is dropCache for n bytes at off (n 0: to the end), so a load
// drops what it has read as it goes and the file's pages never pile up
// beside the copy being filled.
func dropRange(f *os.File, off, n int64) { _ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED) }
