package rerank

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
)

// Layout says where vector i's float32 values lie in a file:
// Base + i·Stride, Dim·4 bytes.
type Layout struct {
	Path   string
	Kind   string // "vec" (aligned or packed), "fvecs", "npy" or "faiss" (in place, unaligned)
	Dim    int
	Count  int64
	Base   int64
	Stride int64
}

// Aligned reports whether every vector starts on a VecAlign boundary.
func (l Layout) Aligned() bool { return l.Base%VecAlign == 0 && l.Stride%VecAlign == 0 }

// OpenLayout recognises a .vec file (by its magic), a FAISS file holding flat
// float vectors (IxF2/IxFI/IxFl, alone or under IHNf/IxMp), an .fvecs file,
// or a float32 NumPy .npy file of shape (count, dim) in C order.
func OpenLayout(path string) (Layout, error) {
	f, err := os.Open(path)
	if err != nil {
		return Layout{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Layout{}, err
	}
	return ReadLayout(f, st.Size(), path)
}

// ReadLayout is OpenLayout over r, size bytes named path (a local file or
// an object): the format is recognised by its bytes and path's extension.
func ReadLayout(f io.ReaderAt, size int64, path string) (Layout, error) {
	var magic [8]byte
	n, _ := f.ReadAt(magic[:min(8, max(size, 0))], 0)
	switch {
	case n == 8 && string(magic[:]) == vecMagic:
		h, err := readVecHeader(f, size, path)
		if err != nil {
			return Layout{}, err
		}
		return Layout{Path: path, Kind: "vec", Dim: int(h.Dim), Count: h.Count, Base: h.Offset, Stride: h.Stride}, nil
	case strings.EqualFold(filepath.Ext(path), ".fvecs"):
		if size < 4 {
			return Layout{}, fmt.Errorf("%w: %s: empty .fvecs file", ErrVectors, path)
		}
		d := int64(int32(binary.LittleEndian.Uint32(magic[:4])))
		if d <= 0 || d > 1<<20 || size%(4+4*d) != 0 {
			return Layout{}, fmt.Errorf("%w: %s: .fvecs rows of dimension %d do not tile its %d bytes (truncated?)", ErrVectors, path, d, size)
		}
		return Layout{Path: path, Kind: "fvecs", Dim: int(d), Count: size / (4 + 4*d), Base: 4, Stride: 4 + 4*d}, nil
	}
	if n >= 6 && string(magic[:6]) == "\x93NUMPY" {
		return npyLayout(f, size, path)
	}
	ff, err := faissfmt.Open(f, size)
	if err != nil {
		return Layout{}, fmt.Errorf("%s: neither a .vec, an .fvecs, an .npy nor a FAISS file with flat vectors: %w", path, err)
	}
	return FAISSLayout(ff, path)
}

// FAISSLayout locates the flat float vectors of a parsed FAISS file (named
// path): in place in its storage's codes section.
func FAISSLayout(ff *faissfmt.File, path string) (Layout, error) {
	s := ff.Storage
	if s == nil {
		return Layout{}, fmt.Errorf("%w: %s: a FAISS file without vectors", ErrVectors, path)
	}
	codes, ok := s.Section("codes")
	if s.Binary || s.SQ != nil || !ok {
		return Layout{}, fmt.Errorf("%w: %s: its %s storage holds no full-precision float vectors", ErrVectors, path, s.FourCC)
	}
	return Layout{Path: path, Kind: "faiss", Dim: s.D, Count: s.NTotal, Base: codes.Offset, Stride: int64(s.D) * 4}, nil
}

// npyLayout locates the rows of a float32 .npy file of shape (count, dim).
func npyLayout(f io.ReaderAt, size int64, path string) (Layout, error) {
	head := make([]byte, min(size, 1<<16))
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return Layout{}, err
	}
	h, err := vecio.ParseNpyHeader(path, head)
	if err != nil {
		return Layout{}, fmt.Errorf("%w: %v", ErrVectors, err)
	}
	if h.Dtype != "f4" || len(h.Shape) != 2 {
		return Layout{}, fmt.Errorf("%w: %s: a %s array of shape %v; vectors are a float32 (<f4) array of shape (count, dim)", ErrVectors, path, h.Dtype, h.Shape)
	}
	n, d := int64(h.Shape[0]), int64(h.Shape[1])
	if d <= 0 || d > 1<<20 {
		return Layout{}, fmt.Errorf("%w: %s: dimension %d out of range", ErrVectors, path, d)
	}
	if want := h.DataOffset + n*d*4; want != size {
		return Layout{}, fmt.Errorf("%w: %s: shape (%d, %d) needs %d bytes, the file has %d (truncated?)", ErrVectors, path, n, d, want, size)
	}
	return Layout{Path: path, Kind: "npy", Dim: int(d), Count: n, Base: h.DataOffset, Stride: d * 4}, nil
}
