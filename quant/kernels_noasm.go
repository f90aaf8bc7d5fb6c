//go:build !amd64 || purego

package quant

// setPop8: without the amd64 assembly pop8 stays Go.
func setPop8(bool) {}
