//go:build !amd64 || purego

package distance

// Prefetch is a no-op without the amd64 assembly.
func Prefetch(b []byte) {}
