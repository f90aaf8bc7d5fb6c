//go:build cgo

package partial

import "github.com/DataDog/zstd"

const zstdAvailable = true

func zstdDecompress(dst, src []byte) (int, error) { return zstd.DecompressInto(dst, src) }

func zstdCompress(dst, src []byte, level int) ([]byte, error) {
	return zstd.CompressLevel(dst, src, level)
}
