package partial

import (
	"os"

	"golang.org/x/sys/unix"
)

// adviseRandom turns off the kernel's read-ahead for f (POSIX_FADV_RANDOM):
// the block cache reads exactly the blocks it misses, and warm-ups read
// large ranges themselves (blockcache.Cached.Warm).
func adviseRandom(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM) }
