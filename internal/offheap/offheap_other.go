//go:build !unix

package offheap

// Alloc returns n zeroed bytes; without mmap they live on the Go heap.
func Alloc(n int) Buf { return Buf{B: make([]byte, max(n, 0))} }
