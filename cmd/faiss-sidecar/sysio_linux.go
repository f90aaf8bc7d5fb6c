package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The bench commands measure cold starts and device traffic with these two
// OS helpers. They are benchmark tools, not storage: they live here, out of
// the library.

// evictPageCache drops the file's clean pages from the page cache
// (posix_fadvise POSIX_FADV_DONTNEED), for cold-start benchmarks. Dirty
// pages are written first so they can be dropped too.
func evictPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil && err != unix.EINVAL {
		return fmt.Errorf("fdatasync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("posix_fadvise DONTNEED %s: %w", path, err)
	}
	return nil
}

// processIO returns this process's bytes read from the storage device
// (read_bytes in /proc/self/io) and its resident set size (VmRSS).
func processIO() (readBytes, rss int64, err error) {
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
