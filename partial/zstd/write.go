package zstd

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// CompressResult describes a file written by CompressSeekable.
type CompressResult struct {
	In, Out int64
	Frames  int
}

// CheckFrameSize reports whether frameSize is a frame size CompressSeekable
// accepts (and readers decompress): 1 byte to 1 GiB.
func CheckFrameSize(frameSize int) error {
	if frameSize <= 0 || frameSize > maxFrameDecomp {
		return fmt.Errorf("zstd frame size %d out of range (1 … %d)", frameSize, maxFrameDecomp)
	}
	return nil
}

// CompressSeekable writes src (n bytes) to dst in the zstd seekable format:
// frames of frameSize uncompressed bytes (the last may be shorter), each an
// independent zstd frame at level, then the seek table with each frame's
// checksum (low 32 bits of XXH64), which readers verify.
// progress, if not nil, is called with the bytes consumed so far.
func CompressSeekable(dst io.Writer, src io.Reader, frameSize, level int, progress func(done int64)) (CompressResult, error) {
	var res CompressResult
	if err := CheckFrameSize(frameSize); err != nil {
		return res, err
	}
	in := make([]byte, frameSize)
	var out []byte
	var table []byte
	for {
		n, err := io.ReadFull(src, in)
		if n > 0 {
			c, err2 := zstdCompress(out[:0], in[:n], level)
			if err2 != nil {
				return res, err2
			}
			out = c
			if _, err2 := dst.Write(out); err2 != nil {
				return res, err2
			}
			table = binary.LittleEndian.AppendUint32(table, uint32(len(out)))
			table = binary.LittleEndian.AppendUint32(table, uint32(n))
			table = binary.LittleEndian.AppendUint32(table, uint32(xxhash.Sum64(in[:n])))
			res.In += int64(n)
			res.Out += int64(len(out))
			res.Frames++
			if res.Frames > maxSeekFrames {
				return res, fmt.Errorf("more than %d frames; use a larger frame size", maxSeekFrames)
			}
			if progress != nil {
				progress(res.In)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return res, err
		}
	}
	var tail []byte
	tail = binary.LittleEndian.AppendUint32(tail, skippableMagic)
	tail = binary.LittleEndian.AppendUint32(tail, uint32(len(table)+seekFooterSize))
	tail = append(tail, table...)
	tail = binary.LittleEndian.AppendUint32(tail, uint32(res.Frames))
	tail = append(tail, checksumFlag)
	tail = binary.LittleEndian.AppendUint32(tail, seekableMagic)
	if _, err := dst.Write(tail); err != nil {
		return res, err
	}
	res.Out += int64(len(tail))
	return res, nil
}
