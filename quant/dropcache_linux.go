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

// writeBack writes n bytes of f at off to the device, waits for them, and
// drops them from the page cache: dirty pages cannot be reclaimed until
// written, and a guide written whole before one sync would hold its size
// in dirty pages, charged to the process's memory cgroup beside the guide
// itself. A file system without sync_file_range (ENOSYS, EINVAL, ESPIPE,
// EOPNOTSUPP) keeps its pages until the final sync: nil. Any other error
// is a write that failed, and must be returned: the kernel counts it
// reported, so the final sync would not report it again.
func writeBack(f *os.File, off, n int64) error {
	const all = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	switch err := unix.SyncFileRange(int(f.Fd()), off, n, all); err {
	case nil:
		dropRange(f, off, n)
		return nil
	case unix.ENOSYS, unix.EINVAL, unix.ESPIPE, unix.EOPNOTSUPP:
		return nil
	default:
		return err
	}
}
