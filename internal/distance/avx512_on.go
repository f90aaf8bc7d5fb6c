//go:build !noavx512

package distance

// avx512Build is whether the AVX-512 kernels are used by default where the
// CPU has them (build with -tags noavx512 for AVX2).
const avx512Build = true
