package rerank

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// The .vec file: full-precision vectors laid out for direct I/O.
//
//	bytes 0–4095   header (all little-endian):
//	  0  magic   "FSVECTOR" (8 bytes)
//	  8  version u32 = 1
//	 12  elem    u32 = 1 (float32)
//	 16  dim     u64
//	 24  count   u64
//	 32  stride  u64  bytes from one record to the next: d·4 rounded up to
//	                  4096 (layout aligned), or d·4 (layout packed)
//	 40  offset  u64  first record = 4096
//	 48  crc32   u32  IEEE CRC of bytes 0–47
//	 52  zero padding to 4096
//	record i at offset + i·stride: d float32 values, zero-padded to stride
//
// Aligned, every record starts on a 4096-byte boundary, so a vector of
// ≤ 4 KiB is one aligned block: one O_DIRECT read, no bytes wasted on
// neighbors; but a small vector is padded to 4 KiB (a 20-d one to 51× its
// bytes), which the page cache and the disk pay for. Packed, records
// follow each other: the file is the data, and an O_DIRECT read of a record
// that crosses a block boundary reads two blocks.
const (
	vecMagic   = "FSVECTOR"
	vecVersion = 1
	elemF32    = 1
	// VecAlign is the record alignment and the header size of .vec files.
	VecAlign = 4096
)

// ErrVectors marks problems with a vector file (errors.Is); their
// messages name the file and say what is wrong in it.
var ErrVectors = errors.New("bad vector file")

// VecHeader is a .vec file's header.
type VecHeader struct {
	Dim, Count, Stride, Offset int64
}

func strideFor(dim int) int64 { return (int64(dim)*4 + VecAlign - 1) / VecAlign * VecAlign }

// The .vec record layouts (VecStride).
const (
	LayoutAligned = "aligned"
	LayoutPacked  = "packed"
)

// VecStride is the record size of dim-dimensional vectors in layout
// (LayoutAligned or LayoutPacked).
func VecStride(dim int, layout string) int64 {
	if layout == LayoutPacked {
		return int64(dim) * 4
	}
	return strideFor(dim)
}

// AutoVecLayout is the layout for dim-dimensional vectors when none is
// asked for: aligned when padding at most doubles a record (d ≥ 512 for
// records up to 4 KiB), where one O_DIRECT block per vector is worth it;
// packed below, where padding would multiply the file (and what the page
// cache holds) for reads that a packed record serves in one block or two.
func AutoVecLayout(dim int) string {
	if strideFor(dim) <= 2*int64(dim)*4 {
		return LayoutAligned
	}
	return LayoutPacked
}

// WriteVec writes count vectors of dim float32 to w in the .vec format,
// layout aligned; next fills dst with vector i. progress (may be nil) gets
// vectors written.
func WriteVec(w io.Writer, dim int, count int64, next func(i int64, dst []float32) error, progress func(done int64)) error {
	return WriteVecLayout(w, dim, count, LayoutAligned, next, progress)
}

// WriteVecLayout is WriteVec in layout (LayoutAligned or LayoutPacked).
func WriteVecLayout(w io.Writer, dim int, count int64, layout string, next func(i int64, dst []float32) error, progress func(done int64)) error {
	if dim <= 0 || dim > 1<<20 || count < 0 {
		return fmt.Errorf("cannot write %d vectors of dimension %d", count, dim)
	}
	if layout != LayoutAligned && layout != LayoutPacked {
		return fmt.Errorf("unknown .vec layout %q (want %s or %s)", layout, LayoutAligned, LayoutPacked)
	}
	stride := VecStride(dim, layout)
	bw := bufio.NewWriterSize(w, 1<<20)
	h := make([]byte, VecAlign)
	copy(h, vecMagic)
	binary.LittleEndian.PutUint32(h[8:], vecVersion)
	binary.LittleEndian.PutUint32(h[12:], elemF32)
	binary.LittleEndian.PutUint64(h[16:], uint64(dim))
	binary.LittleEndian.PutUint64(h[24:], uint64(count))
	binary.LittleEndian.PutUint64(h[32:], uint64(stride))
	binary.LittleEndian.PutUint64(h[40:], VecAlign)
	binary.LittleEndian.PutUint32(h[48:], crc32.ChecksumIEEE(h[:48]))
	if _, err := bw.Write(h); err != nil {
		return err
	}
	v := make([]float32, dim)
	rec := make([]byte, stride)
	for i := int64(0); i < count; i++ {
		if err := next(i, v); err != nil {
			return err
		}
		for j, x := range v {
			binary.LittleEndian.PutUint32(rec[4*j:], math.Float32bits(x))
		}
		if _, err := bw.Write(rec); err != nil {
			return err
		}
		if progress != nil && (i%4096 == 0 || i == count-1) {
			progress(i + 1)
		}
	}
	return bw.Flush()
}

// readVecHeader reads and checks a .vec header against the file size.
func readVecHeader(r io.ReaderAt, size int64, name string) (VecHeader, error) {
	var h [52]byte
	if size < VecAlign {
		return VecHeader{}, badVectors(name, "%d bytes, shorter than the %d-byte header", size, VecAlign)
	}
	if _, err := r.ReadAt(h[:], 0); err != nil {
		return VecHeader{}, fmt.Errorf("%s: reading the .vec header: %w", name, err)
	}
	if string(h[:8]) != vecMagic {
		return VecHeader{}, badVectors(name, "not a .vec file (no FSVECTOR magic)")
	}
	if sum := crc32.ChecksumIEEE(h[:48]); sum != binary.LittleEndian.Uint32(h[48:]) {
		return VecHeader{}, badVectors(name, "header checksum %#08x does not match its bytes (%#08x): corrupt header", binary.LittleEndian.Uint32(h[48:]), sum)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != vecVersion {
		return VecHeader{}, badVectors(name, "version %d, this build reads version %d", v, vecVersion)
	}
	if e := binary.LittleEndian.Uint32(h[12:]); e != elemF32 {
		return VecHeader{}, badVectors(name, "element type %d, only float32 (1) is supported", e)
	}
	vh := VecHeader{
		Dim: int64(binary.LittleEndian.Uint64(h[16:])), Count: int64(binary.LittleEndian.Uint64(h[24:])),
		Stride: int64(binary.LittleEndian.Uint64(h[32:])), Offset: int64(binary.LittleEndian.Uint64(h[40:])),
	}
	switch {
	case vh.Dim <= 0 || vh.Dim > 1<<20:
		return vh, badVectors(name, "dimension %d out of range", vh.Dim)
	case vh.Stride < vh.Dim*4 || (vh.Stride != vh.Dim*4 && vh.Stride%VecAlign != 0) || vh.Offset%VecAlign != 0 || vh.Offset < VecAlign:
		return vh, badVectors(name, "stride %d / offset %d fit dimension %d neither packed (stride d·4) nor with %d-byte alignment", vh.Stride, vh.Offset, vh.Dim, VecAlign)
	case vh.Count < 0 || vh.Count > (size-vh.Offset)/vh.Stride:
		return vh, badVectors(name, "truncated: %d records of %d bytes need %d bytes after the header, the file has %d", vh.Count, vh.Stride, vh.Count*vh.Stride, size-vh.Offset)
	}
	return vh, nil
}
