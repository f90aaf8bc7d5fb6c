//go:build unix

package offheap

import "golang.org/x/sys/unix"

// Alloc returns n zeroed bytes in an anonymous private mapping, advised
// MADV_HUGEPAGE from hugeMin bytes on, falling back to the Go heap if the
// mapping fails. 2 MiB pages cut TLB misses on random access, but a buffer
// filled sparsely (a cache) would get a whole 2 MiB page for each byte
// touched: below hugeMin that costs more memory than the TLB saves.
func Alloc(n int) Buf { return alloc(n, hugeMin) }

// AllocDense is Alloc for a buffer the caller writes whole right away (a
// file read into memory, a pinned section): every page is touched anyway,
// so huge pages cost no extra memory and are advised from 2 MiB on, where
// they save the TLB misses of random access to resident index data.
func AllocDense(n int) Buf { return alloc(n, hugePage) }

func alloc(n, huge int) Buf {
	if n <= 0 {
		return Buf{B: []byte{}}
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return Buf{B: make([]byte, n)}
	}
	if n >= huge {
		adviseHuge(b)
	}
	return Buf{B: b, free: func() error { return unix.Munmap(b) }}
}

const (
	hugeMin  = 64 << 20
	hugePage = 2 << 20
)

// Reserve maps n bytes of address space for a buffer filled sparsely and
// emptied piecewise with Discard (a cache laid out like its file): pages
// take memory only once written, and the mapping reserves no swap. With
// huge set it is advised MADV_HUGEPAGE, for callers that will fill most of
// it. ok is false when the mapping fails (the caller falls back).
func Reserve(n int, huge bool) (b Buf, ok bool) {
	if n <= 0 {
		return Buf{}, false
	}
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
	if err != nil {
		return Buf{}, false
	}
	if huge {
		adviseHuge(m)
	}
	return Buf{B: m, free: func() error { return unix.Munmap(m) }}, true
}

// Discard gives the pages of p (page-aligned, inside a Reserve buffer)
// back to the system; they read as zeros afterwards.
func Discard(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	return unix.Madvise(p, unix.MADV_DONTNEED)
}
