package vecio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Matrix is n rows of dim values, stored row-major in one of the slices.
type Matrix struct {
	N, Dim int
	F32    []float32 // .fvecs, float32 .npy
	U8     []byte    // .bvecs, uint8 .npy
	I64    []int64   // .ivecs, int32/int64 .npy
}

// Bytes is the memory the matrix's values hold.
func (m *Matrix) Bytes() int64 { return 4*int64(len(m.F32)) + int64(len(m.U8)) + 8*int64(len(m.I64)) }

// RowF32 returns row i of a float matrix.
func (m *Matrix) RowF32(i int) []float32 { return m.F32[i*m.Dim : (i+1)*m.Dim] }

// RowU8 returns row i of a byte matrix.
func (m *Matrix) RowU8(i int) []byte { return m.U8[i*m.Dim : (i+1)*m.Dim] }

// RowI64 returns row i of an integer matrix.
func (m *Matrix) RowI64(i int) []int64 { return m.I64[i*m.Dim : (i+1)*m.Dim] }

// Head returns the first n rows (n ≤ N), copied so the rest can be freed.
func (m *Matrix) Head(n int) *Matrix {
	h := &Matrix{N: n, Dim: m.Dim}
	if m.F32 != nil {
		h.F32 = slices.Clone(m.F32[:n*m.Dim])
	}
	if m.U8 != nil {
		h.U8 = slices.Clone(m.U8[:n*m.Dim])
	}
	if m.I64 != nil {
		h.I64 = slices.Clone(m.I64[:n*m.Dim])
	}
	return h
}

// ErrFormat marks malformed files.
var ErrFormat = errors.New("vecio: malformed vector file")

func formatErr(path string, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrFormat, path, fmt.Sprintf(format, a...))
}

// maxElems bounds what a header may ask us to allocate (2^31 values).
const maxElems = 1 << 31

// ReadFile reads path according to its extension.
func ReadFile(path string) (*Matrix, error) { return ReadFileRows(path, 0) }

// ReadFileRows is ReadFile keeping at most rows rows (0: all); .fvecs,
// .bvecs and .ivecs files are then read only as far as those rows go.
func ReadFileRows(path string, rows int) (*Matrix, error) {
	var b []byte
	var err error
	switch ext := strings.ToLower(filepath.Ext(path)); {
	case rows > 0 && (ext == ".fvecs" || ext == ".bvecs" || ext == ".ivecs"):
		b, err = readVecsPrefix(path, ext, rows)
	default:
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	m, err := Parse(path, b)
	if err != nil || rows <= 0 || m.N <= rows {
		return m, err
	}
	return m.Head(rows), nil
}

// readVecsPrefix reads the bytes of a vecs file's first rows rows (sized
// by row 0's dimension; Parse checks the rest).
func readVecsPrefix(path, ext string, rows int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return os.ReadFile(path) // let Parse name the problem
	}
	elem := int64(4)
	if ext == ".bvecs" {
		elem = 1
	}
	d := int64(int32(binary.LittleEndian.Uint32(hdr[:])))
	n := st.Size()
	if d > 0 && d < 1<<30 {
		n = min(n, int64(rows)*(4+d*elem))
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// Parse parses b as the file type path's extension names.
func Parse(path string, b []byte) (*Matrix, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".fvecs":
		return parseVecs(path, b, 4, func(m *Matrix, n int) { m.F32 = make([]float32, 0, n) }, func(m *Matrix, v []byte) {
			for j := 0; j < len(v); j += 4 {
				m.F32 = append(m.F32, math.Float32frombits(binary.LittleEndian.Uint32(v[j:])))
			}
		})
	case ".bvecs":
		return parseVecs(path, b, 1, func(m *Matrix, n int) { m.U8 = make([]byte, 0, n) }, func(m *Matrix, v []byte) { m.U8 = append(m.U8, v...) })
	case ".ivecs":
		return parseVecs(path, b, 4, func(m *Matrix, n int) { m.I64 = make([]int64, 0, n) }, func(m *Matrix, v []byte) {
			for j := 0; j < len(v); j += 4 {
				m.I64 = append(m.I64, int64(int32(binary.LittleEndian.Uint32(v[j:]))))
			}
		})
	case ".npy":
		return parseNpy(path, b)
	case ".txt":
		return parseText(path, b)
	}
	return nil, fmt.Errorf("vecio: %s: unknown extension (want .fvecs, .bvecs, .ivecs, .npy or .txt)", path)
}

func parseVecs(path string, b []byte, elem int, reserve func(*Matrix, int), add func(*Matrix, []byte)) (*Matrix, error) {
	m := &Matrix{}
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			return nil, formatErr(path, "row %d: truncated dimension at byte %d", m.N, off)
		}
		d := int(int32(binary.LittleEndian.Uint32(b[off:])))
		if d <= 0 || d > (len(b)-off-4)/elem {
			return nil, formatErr(path, "row %d at byte %d: dimension %d does not fit the %d bytes left", m.N, off, d, len(b)-off-4)
		}
		if m.N == 0 {
			m.Dim = d
			reserve(m, len(b)/(4+d*elem)*d) // every row this size: appends never regrow
		} else if d != m.Dim {
			return nil, formatErr(path, "row %d at byte %d has dimension %d, row 0 has %d", m.N, off, d, m.Dim)
		}
		add(m, b[off+4:off+4+d*elem])
		off += 4 + d*elem
		m.N++
	}
	return m, nil
}

var npyHeader = regexp.MustCompile(`'descr':\s*'([<>|=]?)([a-z])(\d+)'.*'fortran_order':\s*(True|False).*'shape':\s*\(([\d,\s]*)\)`)

// NpyHeader is what a .npy file's header says: the element type (kind
// and size, e.g. "f4"), the shape, and where the data start.
type NpyHeader struct {
	Dtype      string
	Shape      []int
	DataOffset int64
}

// ParseNpyHeader reads the header at the start of b (the file's first
// bytes, at least the whole header): little-endian or byte-sized C-order
// arrays only.
func ParseNpyHeader(path string, b []byte) (NpyHeader, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return NpyHeader{}, formatErr(path, "not a .npy file (bad magic)")
	}
	var hlen, start int
	switch b[6] {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		if len(b) < 12 {
			return NpyHeader{}, formatErr(path, "truncated header")
		}
		hlen, start = int(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return NpyHeader{}, formatErr(path, "unsupported .npy version %d", b[6])
	}
	if hlen > len(b)-start {
		return NpyHeader{}, formatErr(path, "header of %d bytes runs past the end", hlen)
	}
	h := npyHeader.FindSubmatch(b[start : start+hlen])
	if h == nil {
		return NpyHeader{}, formatErr(path, "cannot read the header %q", bytes.TrimSpace(b[start:start+hlen]))
	}
	if string(h[4]) == "True" {
		return NpyHeader{}, formatErr(path, "Fortran-order arrays are not supported")
	}
	if string(h[1]) == ">" {
		return NpyHeader{}, formatErr(path, "big-endian arrays are not supported")
	}
	var shape []int
	for _, f := range strings.Split(string(h[5]), ",") {
		if f = strings.TrimSpace(f); f != "" {
			v, err := strconv.Atoi(f)
			if err != nil || v < 0 || v > maxElems {
				return NpyHeader{}, formatErr(path, "bad shape %q", h[5])
			}
			shape = append(shape, v)
		}
	}
	return NpyHeader{Dtype: string(h[2]) + string(h[3]), Shape: shape, DataOffset: int64(start + hlen)}, nil
}

func parseNpy(path string, b []byte) (*Matrix, error) {
	nh, err := ParseNpyHeader(path, b)
	if err != nil {
		return nil, err
	}
	shape := nh.Shape
	m := &Matrix{}
	switch len(shape) {
	case 1:
		m.N, m.Dim = 1, shape[0]
	case 2:
		m.N, m.Dim = shape[0], shape[1]
	default:
		return nil, formatErr(path, "shape %v: want a 1-D or 2-D array", shape)
	}
	kind, size := nh.Dtype[:1], nh.Dtype[1:]
	data := b[nh.DataOffset:]
	if m.N > 0 && m.Dim > maxElems/m.N {
		return nil, formatErr(path, "shape %v is too large", shape)
	}
	elems := m.N * m.Dim
	elem := map[string]int{"f4": 4, "u1": 1, "i4": 4, "i8": 8}[kind+size]
	if elem == 0 {
		return nil, formatErr(path, "dtype %s%s is not supported (float32, uint8, int32, int64)", kind, size)
	}
	if len(data) != elems*elem {
		return nil, formatErr(path, "shape %v needs %d bytes of data, the file has %d", shape, elems*elem, len(data))
	}
	switch kind + size {
	case "f4":
		m.F32 = make([]float32, elems)
		for i := range m.F32 {
			m.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case "u1":
		m.U8 = append([]byte(nil), data...)
	case "i4":
		m.I64 = make([]int64, elems)
		for i := range m.I64 {
			m.I64[i] = int64(int32(binary.LittleEndian.Uint32(data[4*i:])))
		}
	case "i8":
		m.I64 = make([]int64, elems)
		for i := range m.I64 {
			m.I64[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
	}
	return m, nil
}

// parseText reads integers, one per line (blank lines and # comments skipped).
func parseText(path string, b []byte) (*Matrix, error) {
	m := &Matrix{Dim: 1}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, formatErr(path, "line %d: %q is not an integer id", line, s)
		}
		m.I64 = append(m.I64, v)
		m.N++
	}
	return m, sc.Err()
}

// WriteFvecs writes rows of float32 in .fvecs format.
func WriteFvecs(w io.Writer, rows [][]float32) error {
	bw := bufio.NewWriter(w)
	var b [4]byte
	for _, r := range rows {
		binary.LittleEndian.PutUint32(b[:], uint32(len(r)))
		bw.Write(b[:])
		for _, v := range r {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			bw.Write(b[:])
		}
	}
	return bw.Flush()
}
