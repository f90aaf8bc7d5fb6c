package partial

import (
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// adviseRandom turns off the kernel's read-ahead for f (POSIX_FADV_RANDOM):
// the block cache reads exactly the blocks it misses, and warm-ups read
// large ranges themselves (blockcache.Cached.Warm).
func adviseRandom(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM) }

// adviseNormal gives f the kernel's default read-ahead back (a Handle's
// file becoming a mapping or a whole read).
func adviseNormal(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_NORMAL) }

// reopen opens the file f holds once more through /proc/self/fd, which
// names the open file itself (even one replaced at its path, or removed);
// without /proc, the file at path.
func reopen(f *os.File, path string) (*os.File, error) {
	g, err := os.Open("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if errors.Is(err, fs.ErrNotExist) {
		return os.Open(path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "reopen", Path: path, Err: errors.Unwrap(err)}
	}
	return g, nil
}
