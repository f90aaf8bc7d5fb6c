//go:build !amd64 || purego

package distance

// Without the amd64 assembly the fast kernels are Go's.
const simd = false

func fast(bool) Kernels { return goKernels() }

// Prefetch is a no-op without the amd64 assembly.
func Prefetch(b []byte) {}
