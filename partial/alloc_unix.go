//go:build unix

package partial

import "golang.org/x/sys/unix"

// allocLarge returns n zeroed bytes outside the Go heap, in an anonymous
// mapping advised MADV_HUGEPAGE (2 MiB pages cut TLB misses on random
// access to a large index), and the function that frees them. It falls back
// to the Go heap if the mapping fails.
func allocLarge(n int) ([]byte, func() error) {
	if n < 4<<20 {
		return make([]byte, n), func() error { return nil }
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n), func() error { return nil }
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // best effort: THP may be off
	return b, func() error { return unix.Munmap(b) }
}
