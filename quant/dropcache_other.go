//go:build !linux

package quant

import "os"

// dropCache does nothing here (see dropcache_linux.go).
func dropCache(*os.File) {}

// dropRange does nothing here (see dropcache_linux.go).
func dropRange(*os.File, int64, int64) {}
