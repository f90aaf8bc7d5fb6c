package rerank

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
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
	// fi is the file OpenLayoutAs read (nil for other layouts).
	fi os.FileInfo
}

// Unchanged reports whether fi, a stat of the path OpenLayoutAs read, is
// still the file it checked: the same file, size and modification time.
// (True for a layout not read by OpenLayoutAs.)
func (l Layout) Unchanged(fi os.FileInfo) bool {
	if l.fi == nil {
		return true
	}
	return os.SameFile(l.fi, fi) && fi.Size() == l.fi.Size() && fi.ModTime().Equal(l.fi.ModTime())
}

// Aligned reports whether every vector starts on a VecAlign boundary.
func (l Layout) Aligned() bool { return l.Base%VecAlign == 0 && l.Stride%VecAlign == 0 }

// OpenLayout recognises a .vec file (by its magic), a FAISS file holding flat
// float vectors (IxF2/IxFI/IxFl, alone or under IHNf/IxMp), an .fvecs file,
// or a float32 NumPy .npy file of shape (count, dim) in C order.
func OpenLayout(path string) (Layout, error) { return OpenLayoutAs(path, path) }

// OpenLayoutAs is OpenLayout naming the file name (as the user gave it)
// in its errors.
func OpenLayoutAs(path, name string) (Layout, error) {
	f, err := os.Open(path)
	if err != nil {
		return Layout{}, partial.NameError(err, path, name)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Layout{}, partial.NameError(err, path, name)
	}
	l, err := ReadLayout(f, st.Size(), name)
	l.Path, l.fi = path, st
	return l, err
}

// maxDim bounds a vector file's dimension.
const maxDim = 1 << 20

// vectorsError is a bad vector file: its message names the file and says
// what is wrong; it is an ErrVectors, and whatever it wraps.
type vectorsError struct{ err error }

func (e *vectorsError) Error() string   { return e.err.Error() }
func (e *vectorsError) Unwrap() []error { return []error{e.err, ErrVectors} }

// badVectors is the vectorsError "name: what".
func badVectors(name, format string, a ...any) error {
	return &vectorsError{fmt.Errorf("%s: %s", name, fmt.Sprintf(format, a...))}
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
		return fvecsLayout(f, size, path)
	}
	if n >= 6 && string(magic[:6]) == "\x93NUMPY" {
		return npyLayout(f, size, path)
	}
	ff, err := faissfmt.Open(f, size)
	if err != nil {
		return Layout{}, &vectorsError{fmt.Errorf("%s: neither a .vec, an .fvecs, an .npy nor a FAISS file with flat vectors: %w", path, err)}
	}
	return FAISSLayout(ff, path)
}

// FAISSLayout locates the flat float vectors of a parsed FAISS file (named
// path): in place in its storage's codes section.
func FAISSLayout(ff *faissfmt.File, path string) (Layout, error) {
	s := ff.Storage
	if s == nil {
		return Layout{}, badVectors(path, "a FAISS file without vectors")
	}
	codes, ok := s.Section("codes")
	if s.Binary || s.SQ != nil || !ok {
		return Layout{}, badVectors(path, "its %s storage holds no full-precision float vectors", s.FourCC)
	}
	return Layout{Path: path, Kind: "faiss", Dim: s.D, Count: s.NTotal, Base: codes.Offset, Stride: int64(s.D) * 4}, nil
}

// fvecsLayout locates the rows of an .fvecs file, after reading every
// record's header (one sequential pass of large reads): each must say the
// first one's dimension, as the search reads the values past each header
// without it.
func fvecsLayout(f io.ReaderAt, size int64, path string) (Layout, error) {
	if size == 0 {
		return Layout{}, badVectors(path, "an empty .fvecs file")
	}
	d, n, err := vecio.CheckVecs(f, size, path, 4)
	switch {
	case errors.Is(err, vecio.ErrFormat):
		return Layout{}, &vectorsError{err}
	case err != nil:
		return Layout{}, err
	case d > maxDim:
		return Layout{}, badVectors(path, "record 0 says d=%d; vectors of more than %d dimensions are not read", d, maxDim)
	}
	return Layout{Path: path, Kind: "fvecs", Dim: d, Count: n, Base: 4, Stride: 4 + 4*int64(d)}, nil
}

// npyTypeNames names the dtypes vecio.ParseNpyHeader returns.
var npyTypeNames = map[string]string{"f4": "float32 (<f4)", "u1": "uint8 (|u1)", "i4": "int32 (<i4)", "i8": "int64 (<i8)"}

// npyLayout locates the rows of a float32 .npy file of shape (count, dim).
func npyLayout(f io.ReaderAt, size int64, path string) (Layout, error) {
	head := make([]byte, min(size, 1<<17)) // a whole header (vecio reads at most 64 KiB)
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return Layout{}, err
	}
	h, err := vecio.ParseNpyHeader(path, head)
	if err != nil {
		return Layout{}, &vectorsError{err}
	}
	if h.Dtype != "f4" || len(h.Shape) != 2 {
		return Layout{}, badVectors(path, "the array is %s, of shape %v; vectors are a float32 (<f4) array of shape (count, dim)", npyTypeNames[h.Dtype], h.Shape)
	}
	n, d := int64(h.Shape[0]), int64(h.Shape[1])
	if d <= 0 || d > maxDim {
		return Layout{}, badVectors(path, "dimension %d out of range (1 to %d)", d, maxDim)
	}
	if want := h.DataOffset + n*d*4; want != size {
		return Layout{}, badVectors(path, "shape (%d, %d) needs %d bytes, the file has %d (truncated?)", n, d, want, size)
	}
	return Layout{Path: path, Kind: "npy", Dim: int(d), Count: n, Base: h.DataOffset, Stride: d * 4}, nil
}
