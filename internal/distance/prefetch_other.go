//go:build !amd64 || purego

package distance

// Prefetch is a no-op without the amd64 assembly.
func Prefetch(b []byte) {}

// setAVX512 has no AVX-512 kernels to switch without the amd64 assembly.
func setAVX512(on bool) {}
