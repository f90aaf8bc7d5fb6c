package partial

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// EvictPageCache drops the file's clean pages from the page cache
// (posix_fadvise POSIX_FADV_DONTNEED), for cold-start benchmarks. Dirty pages
// are written first so they can be dropped too.
func EvictPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil && err != unix.EINVAL {
		return fmt.Errorf("partial: fdatasync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("partial: posix_fadvise DONTNEED %s: %w", path, err)
	}
	return nil
}

// ProcessIO returns this process's bytes read from the storage device
// (read_bytes in /proc/self/io) and its resident set size (VmRSS).
func ProcessIO() (readBytes, rss int64, err error) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0, err
	}
	readBytes = procField(b, "read_bytes:")
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	rss = procField(st, "VmRSS:") * 1024
	return readBytes, rss, nil
}

func procField(b []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := bytes.Fields(sc.Bytes()); len(f) >= 2 && string(f[0]) == key {
			v, _ := strconv.ParseInt(string(f[1]), 10, 64)
			return v
		}
	}
	return 0
}

// adviseRandom turns off the kernel's read-ahead for f (POSIX_FADV_RANDOM):
// the block cache reads exactly the blocks it misses, and warm-ups read
// large ranges themselves (Cached.Fill).
func adviseRandom(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM) }
