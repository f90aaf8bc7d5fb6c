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

// ErrFormat marks malformed files (errors.Is); their messages name the
// file and what is wrong in it (see FormatError).
var ErrFormat = errors.New("malformed vector file")

// FormatError is a malformed file: its name as the user gave it, and what
// is wrong. It never quotes the file's bytes, only numbers decoded from
// them.
type FormatError struct {
	Name, Detail string
}

func (e *FormatError) Error() string { return e.Name + ": " + e.Detail }

// Is makes every FormatError an ErrFormat.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

func formatErr(path string, format string, a ...any) error {
	return &FormatError{Name: path, Detail: fmt.Sprintf(format, a...)}
}

// maxElems bounds what a header may ask us to allocate (2^31 values).
const maxElems = 1 << 31

// Formats is what one use of a vector file accepts, as its help lists it.
type Formats struct {
	What string   // the use, as messages name it ("queries")
	Exts []string // the accepted extensions, lower case, with the dot
	Help string   // how the help lists them
}

// The uses the CLI reads vector files for.
var (
	Queries      = Formats{"queries", []string{".fvecs", ".bvecs", ".npy"}, ".fvecs, .bvecs or .npy"}
	FloatQueries = Formats{"float queries", []string{".fvecs", ".npy"}, ".fvecs or float32 .npy"}
	GroundTruth  = Formats{"ground-truth ids", []string{".ivecs", ".npy"}, ".ivecs or integer .npy"}
	IDs          = Formats{"ids", []string{".txt", ".ivecs", ".npy"}, ".txt (one per line), .ivecs or integer .npy"}
)

// allFormats is what Parse reads.
var allFormats = Formats{"vector files", []string{".fvecs", ".bvecs", ".ivecs", ".npy", ".txt"}, ".fvecs, .bvecs, .ivecs, .npy or .txt"}

// accepts checks path's extension against f.
func (f Formats) accepts(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if slices.Contains(f.Exts, ext) {
		return nil
	}
	if ext == "" {
		return fmt.Errorf("%s: %s are read from %s files; this name has no extension", path, f.What, f.Help)
	}
	return fmt.Errorf("%s: %s are read from %s files, not %s", path, f.What, f.Help, ext)
}

// Read reads the file at path for the use f names (its first rows rows,
// 0: all, as ReadFileRows), refusing a format f does not take.
func Read(path string, rows int, f Formats) (*Matrix, error) {
	if err := f.accepts(path); err != nil {
		return nil, err
	}
	return ReadFileRows(path, rows)
}

// ReadFile reads path according to its extension.
func ReadFile(path string) (*Matrix, error) { return ReadFileRows(path, 0) }

// ReadFileRows is ReadFile keeping at most rows rows (0: all); .fvecs,
// .bvecs and .ivecs files are then read only as far as those rows go,
// after one pass over the whole file that checks every record's header
// (CheckVecs).
func ReadFileRows(path string, rows int) (*Matrix, error) {
	if elem := vecsElem(path); rows > 0 && elem > 0 {
		b, err := readVecsPrefix(path, elem, rows)
		if err != nil {
			return nil, err
		}
		return Parse(path, b)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(path, b)
	if err != nil || rows <= 0 || m.N <= rows {
		return m, err
	}
	return m.Head(rows), nil
}

// vecsElem is the bytes of one value in the .fvecs, .bvecs or .ivecs file
// path names (0 for other extensions).
func vecsElem(path string) int {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".fvecs", ".ivecs":
		return 4
	case ".bvecs":
		return 1
	}
	return 0
}

// readVecsPrefix checks the vecs file at path (CheckVecs) and reads the
// bytes of its first rows records.
func readVecsPrefix(path string, elem, rows int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	d, n, err := CheckVecs(f, st.Size(), path, elem)
	if err != nil {
		return nil, err
	}
	b := make([]byte, min(n, int64(rows))*(4+int64(d)*int64(elem)))
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// scanChunk is how much of a vecs file CheckVecs reads at once; records
// of bigRecord bytes or more have their headers read one by one instead.
const (
	scanChunk = 4 << 20
	bigRecord = 64 << 10
)

// CheckVecs checks that the size bytes of r (a .fvecs, .bvecs or .ivecs
// file of elem-byte values, named name in errors) are whole records of
// one dimension, the first record's: every record's header is read, in
// one sequential pass of large reads. It returns that dimension and the
// number of records (0, 0 for an empty file).
func CheckVecs(r io.ReaderAt, size int64, name string, elem int) (dim int, count int64, err error) {
	if size == 0 {
		return 0, 0, nil
	}
	var h [4]byte
	if size < 4 {
		return 0, 0, formatErr(name, "%d bytes, fewer than a record's 4-byte dimension", size)
	}
	if err := readFull(r, h[:], 0); err != nil {
		return 0, 0, fmt.Errorf("%s: reading record 0: %w", name, err)
	}
	d := int64(int32(binary.LittleEndian.Uint32(h[:])))
	rec, err := vecsRecord(name, d, elem, size)
	if err != nil {
		return 0, 0, err
	}
	count = size / rec
	if rec >= bigRecord {
		for i := int64(1); i < count; i++ {
			if err := readFull(r, h[:], i*rec); err != nil {
				return 0, 0, fmt.Errorf("%s: reading record %d: %w", name, i, err)
			}
			if err := checkRecords(name, h[:], i, rec, d); err != nil {
				return 0, 0, err
			}
		}
		return int(d), count, vecsTail(r, size, rec, d, name)
	}
	per := max(1, scanChunk/rec)
	buf := make([]byte, min(per, count)*rec)
	for i := int64(0); i < count; i += per {
		b := buf[:min(per, count-i)*rec]
		if err := readFull(r, b, i*rec); err != nil {
			return 0, 0, fmt.Errorf("%s: reading records from %d: %w", name, i, err)
		}
		if err := checkRecords(name, b, i, rec, d); err != nil {
			return 0, 0, err
		}
	}
	return int(d), count, vecsTail(r, size, rec, d, name)
}

// vecsTail is checkTail for the bytes of r past its whole records (nil
// when there are none).
func vecsTail(r io.ReaderAt, size, rec, d int64, name string) error {
	if size%rec == 0 {
		return nil
	}
	var h [4]byte
	head := h[:min(4, size%rec)]
	if err := readFull(r, head, size/rec*rec); err != nil {
		return fmt.Errorf("%s: reading record %d: %w", name, size/rec, err)
	}
	return checkTail(name, head, size, rec, d)
}

// readFull is r.ReadAt(b, off) that takes a whole read ending with io.EOF
// (io.ReaderAt allows it at the end of the input) as a success.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) && errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// vecsRecord checks the dimension d record 0 of a vecs file of size bytes
// says, and returns the size of a record of that dimension, which must
// tile the file.
func vecsRecord(name string, d int64, elem int, size int64) (int64, error) {
	switch {
	case d <= 0:
		return 0, formatErr(name, "record 0 says d=%d; a dimension is at least 1", d)
	case d > (size-4)/int64(elem):
		return 0, formatErr(name, "record 0 says d=%d, more values than the file's %d bytes hold", d, size)
	}
	return 4 + d*int64(elem), nil
}

// checkTail explains, once every whole record's header agreed, why size
// bytes are not whole records of rec bytes: a last record cut short (its
// header, head, says d: the file was truncated), one whose header
// disagrees, or bytes after the last record. head is the 4 bytes after
// the last whole record, or fewer when fewer remain.
func checkTail(name string, head []byte, size, rec, d int64) error {
	n, tail := size/rec, size%rec
	if len(head) == 4 {
		switch got := int64(int32(binary.LittleEndian.Uint32(head))); {
		case got != d:
			return formatErr(name, "record %d says d=%d, the first says d=%d", n, got, d)
		default:
			return formatErr(name, "record %d is cut short: %d of its %d bytes (truncated?)", n, tail, rec)
		}
	}
	return formatErr(name, "%d bytes after the last whole record of d=%d (record %d, %d bytes each) are not a record",
		tail, d, n-1, rec)
}

// checkRecords checks the headers of the records b holds (record first on,
// rec bytes each) against d, the first record's dimension.
func checkRecords(name string, b []byte, first, rec, d int64) error {
	for off := int64(0); off < int64(len(b)); off += rec {
		if got := int64(int32(binary.LittleEndian.Uint32(b[off:]))); got != d {
			return formatErr(name, "record %d says d=%d, the first says d=%d", first+off/rec, got, d)
		}
	}
	return nil
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
	return nil, allFormats.accepts(path)
}

// parseVecs checks every record of b (see CheckVecs) and decodes them.
func parseVecs(path string, b []byte, elem int, reserve func(*Matrix, int), add func(*Matrix, []byte)) (*Matrix, error) {
	m := &Matrix{}
	if len(b) == 0 {
		return m, nil
	}
	if len(b) < 4 {
		return nil, formatErr(path, "%d bytes, fewer than a record's 4-byte dimension", len(b))
	}
	d := int64(int32(binary.LittleEndian.Uint32(b)))
	rec, err := vecsRecord(path, d, elem, int64(len(b)))
	if err != nil {
		return nil, err
	}
	whole := int64(len(b)) / rec * rec
	if err := checkRecords(path, b[:whole], 0, rec, d); err != nil {
		return nil, err
	}
	if whole < int64(len(b)) {
		return nil, checkTail(path, b[whole:min(whole+4, int64(len(b)))], int64(len(b)), rec, d)
	}
	m.N, m.Dim = int(int64(len(b))/rec), int(d)
	reserve(m, m.N*m.Dim)
	for off := 0; off < len(b); off += int(rec) {
		add(m, b[off+4:off+int(rec)])
	}
	return m, nil
}

// NpyHeader is what a .npy file's header says: the element type (kind
// and size: "f4", "u1", "i4" or "i8"), the shape, and where the data
// start.
type NpyHeader struct {
	Dtype      string
	Shape      []int
	DataOffset int64
}

// maxNpyHeader bounds a .npy header's length (NumPy's own reader refuses
// headers past 10,000 bytes by default).
const maxNpyHeader = 1<<16 - 1

// npyDtypes are the dtypes read, as a header spells them: little-endian
// (or, for bytes, order-free) only.
var npyDtypes = map[string]string{"<f4": "f4", "|u1": "u1", "<i4": "i4", "<i8": "i8"}

const npyDtypesHelp = "float32 (<f4), uint8 (|u1), int32 (<i4) or int64 (<i8)"

// npyTypeString matches a well-formed simple dtype string, which messages
// may then quote.
var npyTypeString = regexp.MustCompile(`^[<>|=][a-zA-Z][0-9]{1,2}$`)

// ParseNpyHeader reads and checks the header at the start of b (the
// file's first bytes, at least the whole header): format version 1.0,
// 2.0 or 3.0, a header of exactly the keys descr, fortran_order and
// shape, one of the dtypes npyDtypes lists, C order. The caller checks
// the shape against the file's size.
func ParseNpyHeader(path string, b []byte) (NpyHeader, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return NpyHeader{}, formatErr(path, "not a .npy file (it does not start with NumPy's magic bytes)")
	}
	var hlen, start int
	switch major, minor := b[6], b[7]; {
	case minor == 0 && major == 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:])), 10
	case minor == 0 && (major == 2 || major == 3):
		if len(b) < 12 {
			return NpyHeader{}, formatErr(path, "truncated .npy header")
		}
		hlen, start = int(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return NpyHeader{}, formatErr(path, ".npy format version %d.%d is not supported (1.0, 2.0 or 3.0)", major, minor)
	}
	switch {
	case hlen > maxNpyHeader:
		return NpyHeader{}, formatErr(path, "a .npy header of %d bytes, more than the %d read", hlen, maxNpyHeader)
	case hlen > len(b)-start:
		return NpyHeader{}, formatErr(path, "its .npy header of %d bytes runs past the end of the file", hlen)
	}
	descr, fortran, shape, msg := parseNpyDict(b[start : start+hlen])
	if msg != "" {
		return NpyHeader{}, formatErr(path, "its .npy header %s", msg)
	}
	dtype, ok := npyDtypes[descr]
	switch {
	case ok:
	case npyTypeString.MatchString(descr) && descr[0] == '>':
		return NpyHeader{}, formatErr(path, "dtype %s is big-endian; the dtypes read are %s", descr, npyDtypesHelp)
	case npyTypeString.MatchString(descr):
		return NpyHeader{}, formatErr(path, "dtype %s is not supported; the dtypes read are %s", descr, npyDtypesHelp)
	default:
		return NpyHeader{}, formatErr(path, "its dtype is not a simple NumPy type string; the dtypes read are %s", npyDtypesHelp)
	}
	if fortran {
		return NpyHeader{}, formatErr(path, "Fortran-order (column-major) arrays are not supported; save a C-order array (np.ascontiguousarray)")
	}
	return NpyHeader{Dtype: dtype, Shape: shape, DataOffset: int64(start + hlen)}, nil
}

// parseNpyDict parses a .npy header, the repr of a Python dict of the
// keys descr (a string), fortran_order (True or False) and shape (a
// tuple of ints), padded with spaces and a newline. msg says what is
// wrong, without quoting the header.
func parseNpyDict(h []byte) (descr string, fortran bool, shape []int, msg string) {
	p := 0
	ws := func() {
		for p < len(h) && (h[p] == ' ' || h[p] == '\n') {
			p++
		}
	}
	str := func() (string, bool) {
		if p >= len(h) || (h[p] != '\'' && h[p] != '"') {
			return "", false
		}
		q := h[p]
		for e := p + 1; e < len(h) && e-p <= 64; e++ {
			switch h[e] {
			case '\\', '\n':
				return "", false
			case q:
				s := string(h[p+1 : e])
				p = e + 1
				return s, true
			}
		}
		return "", false
	}
	ws()
	if p >= len(h) || h[p] != '{' {
		return "", false, nil, "is not a Python dict"
	}
	p++
	seen := map[string]bool{}
	for {
		ws()
		if p < len(h) && h[p] == '}' {
			p++
			break
		}
		key, ok := str()
		if !ok {
			return "", false, nil, "has a key that is not a quoted name"
		}
		ws()
		if p >= len(h) || h[p] != ':' {
			return "", false, nil, "is not a well-formed dict (a key without ':')"
		}
		p++
		ws()
		switch key {
		case "descr":
			if descr, ok = str(); !ok {
				return "", false, nil, "has a descr that is not a type string (structured dtypes are not supported)"
			}
		case "fortran_order":
			switch {
			case bytes.HasPrefix(h[p:], []byte("True")):
				fortran, p = true, p+4
			case bytes.HasPrefix(h[p:], []byte("False")):
				fortran, p = false, p+5
			default:
				return "", false, nil, "has a fortran_order that is neither True nor False"
			}
		case "shape":
			if shape, ok = parseNpyShape(h, &p); !ok {
				return "", false, nil, fmt.Sprintf("has a shape that is not a tuple of integers from 0 to %d", maxElems)
			}
		default:
			return "", false, nil, "has a key other than descr, fortran_order and shape"
		}
		if seen[key] {
			return "", false, nil, "names " + key + " twice"
		}
		seen[key] = true
		ws()
		if p < len(h) && h[p] == ',' {
			p++
			continue
		}
		if p < len(h) && h[p] == '}' {
			p++
			break
		}
		return "", false, nil, "is not a well-formed dict"
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return "", false, nil, "lacks " + k
		}
	}
	ws()
	if p != len(h) {
		return "", false, nil, "has bytes after its dict other than space padding"
	}
	return descr, fortran, shape, ""
}

// parseNpyShape parses a tuple of non-negative ints (at most maxElems
// each) at h[*p:].
func parseNpyShape(h []byte, p *int) ([]int, bool) {
	i := *p
	if i >= len(h) || h[i] != '(' {
		return nil, false
	}
	i++
	shape := []int{}
	for {
		for i < len(h) && h[i] == ' ' {
			i++
		}
		if i < len(h) && h[i] == ')' {
			*p = i + 1
			return shape, true
		}
		j := i
		for j < len(h) && j-i <= 10 && h[j] >= '0' && h[j] <= '9' {
			j++
		}
		v, err := strconv.Atoi(string(h[i:j]))
		if j == i || err != nil || v > maxElems || len(shape) >= 32 {
			return nil, false
		}
		shape = append(shape, v)
		for i = j; i < len(h) && h[i] == ' '; i++ {
		}
		switch {
		case i < len(h) && h[i] == ',':
			i++
		case i < len(h) && h[i] == ')':
		default:
			return nil, false
		}
	}
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
	data := b[nh.DataOffset:]
	if m.N > 0 && m.Dim > maxElems/m.N {
		return nil, formatErr(path, "shape %v is too large", shape)
	}
	elems := m.N * m.Dim
	elem := map[string]int{"f4": 4, "u1": 1, "i4": 4, "i8": 8}[nh.Dtype]
	if len(data) != elems*elem {
		return nil, formatErr(path, "shape %v needs %d bytes of data, the file has %d", shape, elems*elem, len(data))
	}
	switch nh.Dtype {
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
			return nil, formatErr(path, "line %d is not an integer id", line)
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
