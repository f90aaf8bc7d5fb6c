package partial

import "github.com/faiss-sidecar/faiss-sidecar/internal/offheap"

// allocLarge returns n zeroed bytes the caller fills at once, outside the Go
// heap (on huge pages) from 4 MiB on, and the function that frees them.
func allocLarge(n int) ([]byte, func() error) {
	if n < 4<<20 {
		return make([]byte, n), func() error { return nil }
	}
	b := offheap.AllocDense(n)
	return b.B, b.Free
}
