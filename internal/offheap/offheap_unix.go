//go:build unix

package offheap

import "golang.org/x/sys/unix"

// Alloc returns n zeroed bytes in an anonymous private mapping, advised
// MADV_HUGEPAGE from hugeMin bytes on (2 MiB pages cut TLB misses on random
// access; below that, rounding pages up to 2 MiB would cost more memory
// than the TLB saves), falling back to the Go heap if the mapping fails.
func Alloc(n int) Buf {
	if n <= 0 {
		return Buf{B: []byte{}}
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return Buf{B: make([]byte, n)}
	}
	if n >= hugeMin {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // best effort: THP may be off
	}
	return Buf{B: b, free: func() error { return unix.Munmap(b) }}
}

const hugeMin = 64 << 20
