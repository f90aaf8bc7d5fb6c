//go:build !linux

package quant

import "os"

// dropCache does nothing here (see dropcache_linux.go).
func dropCache(*os.File) {}
