//go:build !amd64 || purego

package quant

// popKernel: without the amd64 assembly pop8 is Go.
func popKernel(bool) (pop8Func, string) { return pop8Go, "go" }
