//go:build !unix

package offheap

// Alloc returns n zeroed bytes; without mmap they live on the Go heap.
func Alloc(n int) Buf { return Buf{B: make([]byte, max(n, 0))} }

// AllocDense is Alloc for a buffer written whole right away.
func AllocDense(n int) Buf { return Alloc(n) }

// Reserve is not available without mmap: callers fall back.
func Reserve(n int, huge bool) (Buf, bool) { return Buf{}, false }

// Discard is a no-op without mmap (Reserve never succeeds).
func Discard(p []byte) error { return nil }

// Populate is not available without mmap.
func Populate([]byte) bool { return false }
