//go:build !cgo

package zstd

import (
	"errors"
	"fmt"
)

const zstdAvailable = false

var errNoZstd = fmt.Errorf("zstd needs cgo: %w", errors.ErrUnsupported)

func zstdDecompress(dst, src []byte) (int, error) { return 0, errNoZstd }

func zstdCompress(dst, src []byte, level int) ([]byte, error) { return nil, errNoZstd }
