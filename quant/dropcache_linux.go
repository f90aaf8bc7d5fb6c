package quant

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCache asks the kernel to drop f's clean pages from the page cache
// (POSIX_FADV_DONTNEED): a loaded guide is held in its own memory, and
// its file's pages would count a second time against a memory limit
// until reclaimed.
func dropCache(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
