//go:build noavx512

package distance

// avx512Build is whether the AVX-512 kernels are used by default where the
// CPU has them (built with -tags noavx512: AVX2).
const avx512Build = false
