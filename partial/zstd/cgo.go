//go:build cgo

package zstd

import ddzstd "github.com/DataDog/zstd"

const zstdAvailable = true

func zstdDecompress(dst, src []byte) (int, error) { return ddzstd.DecompressInto(dst, src) }

func zstdCompress(dst, src []byte, level int) ([]byte, error) {
	return ddzstd.CompressLevel(dst, src, level)
}
