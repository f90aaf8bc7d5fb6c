//go:build !unix

package offheap

// Alloc returns n zeroed bytes; without mmap they live on the Go heap.
func Alloc(n int) Buf { return Buf{B: make([]byte, max(n, 0))} }

// AllocDense is Alloc for a buffer written whole right away.
func AllocDense(n int) Buf { return Alloc(n) }
