//go:build !amd64 || purego

package distance

// Without the amd64 assembly the fast kernels are Go's.
const simd = false

func fast(bool) Kernels { return goKernels() }

// Prefetch is a no-op without the amd64 assembly.
func Prefetch(b []byte) {}

// minSlot2SIMD is never called without the amd64 assembly (simd is false).
func minSlot2SIMD(dis []float32, ids []int32) (int, int, bool) { return minSlot2Go(dis, ids) }
