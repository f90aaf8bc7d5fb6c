package vecio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fvecs(rows ...[]float32) []byte {
	var b bytes.Buffer
	if err := WriteFvecs(&b, rows); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func npy(descr, shape string, data []byte) []byte {
	h := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }"
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(b[8:], uint16(len(h)))
	return append(append(b, h...), data...)
}

func TestParse(t *testing.T) {
	m, err := Parse("q.fvecs", fvecs([]float32{1, 2, 3}, []float32{4, 5, 6}))
	if err != nil || m.N != 2 || m.Dim != 3 || m.RowF32(1)[2] != 6 {
		t.Fatalf("fvecs: %+v %v", m, err)
	}
	data := make([]byte, 8)
	binary.LittleEndian.PutUint32(data, math.Float32bits(1.5))
	binary.LittleEndian.PutUint32(data[4:], math.Float32bits(-2))
	m, err = Parse("q.npy", npy("<f4", "(1, 2)", data))
	if err != nil || m.N != 1 || m.Dim != 2 || m.F32[1] != -2 {
		t.Fatalf("npy: %+v %v", m, err)
	}
	m, err = Parse("ids.txt", []byte("# allowed\n3\n\n17\n"))
	if err != nil || m.N != 2 || m.I64[1] != 17 {
		t.Fatalf("txt: %+v %v", m, err)
	}
	bv := []byte{2, 0, 0, 0, 7, 8, 2, 0, 0, 0, 9, 10}
	if m, err = Parse("q.bvecs", bv); err != nil || m.N != 2 || m.RowU8(1)[1] != 10 {
		t.Fatalf("bvecs: %+v %v", m, err)
	}
	for _, c := range []struct {
		name string
		b    []byte
		msg  string
	}{
		{"q.fvecs", fvecs([]float32{1, 2})[:9], "record 0 says d=2, more values than the file's 9 bytes hold"},
		{"q.fvecs", append(fvecs([]float32{1, 2}), fvecs([]float32{1})...), "record 1 says d=1, the first says d=2"},
		{"q.fvecs", append(fvecs([]float32{1, 2}), fvecs([]float32{1, 2, 3})[:12]...), "record 1 says d=3, the first says d=2"},
		{"q.fvecs", []byte{0xff, 0xff, 0xff, 0x7f}, "record 0 says d=2147483647, more values"},
		{"q.npy", npy("<f8", "(1, 2)", make([]byte, 16)), "dtype <f8 is not supported"},
		{"q.npy", npy("<f4", "(3, 2)", make([]byte, 16)), "needs 24 bytes of data"},
		{"q.npy", []byte("garbage"), "not a .npy file"},
		{"ids.txt", []byte("1\nx\n"), "line 2 is not an integer id"},
	} {
		if _, err := Parse(c.name, c.b); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.msg)
		}
	}
}

// FuzzParse: no input crashes a parser or makes rows inconsistent.
func FuzzParse(f *testing.F) {
	f.Add(".fvecs", fvecs([]float32{1, 2, 3}))
	f.Add(".npy", npy("<f4", "(1, 1)", make([]byte, 4)))
	f.Add(".npy", npy("|u1", "(2, 3)", make([]byte, 6)))
	f.Add(".bvecs", []byte{1, 0, 0, 0, 5})
	f.Add(".ivecs", []byte{1, 0, 0, 0, 5, 0, 0, 0})
	f.Add(".txt", []byte("1\n2\n"))
	f.Add(".fvecs", vecsFile(".fvecs", 8, 3, map[int]int32{5: 2, 7: 4}))
	f.Add(".bvecs", vecsFile(".bvecs", 4, 5, map[int]int32{3: 6}))
	f.Add(".ivecs", vecsFile(".ivecs", 3, 2, nil)[:20])
	f.Add(".npy", npyRaw(2, 0, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", make([]byte, 16)))
	f.Add(".npy", npyRaw(1, 0, "{'descr': '>f4', 'fortran_order': True, 'shape': (1, 1), }\n", make([]byte, 4)))
	f.Add(".npy", npyRaw(1, 0, "{'shape': (1, 1), 'descr': '<f4', 'fortran_order': False, 'descr': '<f4'}", make([]byte, 4)))
	f.Fuzz(func(t *testing.T, ext string, b []byte) {
		m, err := Parse("x"+ext, b)
		if err != nil {
			return
		}
		if got := len(m.F32) + len(m.U8) + len(m.I64); got != m.N*m.Dim {
			t.Fatalf("%d values for %d×%d", got, m.N, m.Dim)
		}
		// A vecs file parses only as whole records, each of its first's
		// dimension.
		if elem := vecsElem(ext); elem > 0 && m.N > 0 {
			rec := 4 + m.Dim*elem
			if len(b) != m.N*rec {
				t.Fatalf("%d bytes for %d records of %d", len(b), m.N, rec)
			}
			for i := range m.N {
				if d := int(int32(binary.LittleEndian.Uint32(b[i*rec:]))); d != m.Dim {
					t.Fatalf("record %d says d=%d, parsed as %d", i, d, m.Dim)
				}
			}
		}
	})
}

// TestReadFileRows: a row limit reads only that many rows, equal to the
// head of the whole file, for every format.
func TestReadFileRows(t *testing.T) {
	dir := t.TempDir()
	var fv, bv bytes.Buffer
	for i := range 5 {
		binary.Write(&fv, binary.LittleEndian, int32(3))
		binary.Write(&bv, binary.LittleEndian, int32(3))
		for j := range 3 {
			binary.Write(&fv, binary.LittleEndian, float32(i*3+j))
			bv.WriteByte(byte(i*3 + j))
		}
	}
	for name, b := range map[string][]byte{"a.fvecs": fv.Bytes(), "a.bvecs": bv.Bytes(), "a.ivecs": fv.Bytes(), "a.txt": []byte("1\n4\n7\n")} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o644)
		all, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, rows := range []int{1, 2, 5, 9} {
			m, err := ReadFileRows(p, rows)
			if err != nil {
				t.Fatalf("%s %d rows: %v", name, rows, err)
			}
			want := all
			if rows < all.N {
				want = all.Head(rows)
			}
			if m.N != want.N || m.Dim != want.Dim || !slices.Equal(m.F32, want.F32) || !slices.Equal(m.U8, want.U8) || !slices.Equal(m.I64, want.I64) {
				t.Fatalf("%s %d rows: %+v, want %+v", name, rows, m, want)
			}
		}
	}
}

// vecsFile is n records of dimension d in the format ext names, record
// i's header saying dims[i] when given.
func vecsFile(ext string, n, d int, dims map[int]int32) []byte {
	elem := 4
	if ext == ".bvecs" {
		elem = 1
	}
	var b []byte
	for i := range n {
		h := int32(d)
		if v, ok := dims[i]; ok {
			h = v
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(h))
		for j := range d * elem {
			b = append(b, byte(i+j))
		}
	}
	return b
}

// TestVecsRecordHeaders: a .fvecs/.bvecs/.ivecs file whose records
// disagree is refused, naming the file and the first record that
// disagrees, whether it is read whole, a row prefix of it (the check
// covers the rows not kept), or checked in place (CheckVecs); so are a
// truncated last record and a first dimension that is zero, negative or
// larger than the file.
func TestVecsRecordHeaders(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{".fvecs", ".bvecs", ".ivecs"} {
		good := vecsFile(ext, 2000, 32, nil)
		elem := 4
		if ext == ".bvecs" {
			elem = 1
		}
		for _, c := range []struct {
			name string
			b    []byte
			msg  string
		}{
			{"record5", vecsFile(ext, 2000, 32, map[int]int32{5: 31, 1999: 33}), "record 5 says d=31, the first says d=32"},
			{"last", vecsFile(ext, 2000, 32, map[int]int32{1999: 33}), "record 1999 says d=33, the first says d=32"},
			{"negative", vecsFile(ext, 2000, 32, map[int]int32{1000: -32}), "record 1000 says d=-32, the first says d=32"},
			{"truncated", good[:len(good)-3], fmt.Sprintf("record 1999 is cut short: %d of its %d bytes (truncated?)", 4+32*elem-3, 4+32*elem)},
			// The file is too long, not truncated: the record whose header
			// says so is named, before the size is judged.
			{"longer", append(vecsFile(ext, 2000, 32, map[int]int32{1999: 33}), make([]byte, elem)...), "record 1999 says d=33, the first says d=32"},
			{"extra", append(bytes.Clone(good), 0, 0), fmt.Sprintf("2 bytes after the last whole record of d=32 (record 1999, %d bytes each) are not a record", 4+32*elem)},
			{"zero", vecsFile(ext, 3, 32, map[int]int32{0: 0}), "record 0 says d=0; a dimension is at least 1"},
			{"below", vecsFile(ext, 3, 32, map[int]int32{0: -7}), "record 0 says d=-7; a dimension is at least 1"},
			{"huge", vecsFile(ext, 3, 32, map[int]int32{0: 1 << 30}), "record 0 says d=1073741824, more values than"},
			{"short", []byte{32, 0}, "2 bytes, fewer than a record's 4-byte dimension"},
		} {
			p := filepath.Join(dir, c.name+ext)
			require.NoError(t, os.WriteFile(p, c.b, 0o644))
			named := func(err error, name, how string) {
				t.Helper()
				require.ErrorIs(t, err, ErrFormat, "%s%s %s", c.name, ext, how)
				assert.True(t, strings.HasPrefix(err.Error(), name+": "), "%s%s %s: %v", c.name, ext, how, err)
				assert.ErrorContains(t, err, c.msg, "%s%s %s", c.name, ext, how)
				if !strings.Contains(c.msg, "truncated") {
					assert.NotContains(t, err.Error(), "truncated", "%s%s %s", c.name, ext, how)
				}
			}
			_, err := Parse(p, c.b)
			named(err, p, "Parse")
			_, err = ReadFile(p)
			named(err, p, "ReadFile")
			_, err = ReadFileRows(p, 3)
			named(err, p, "ReadFileRows")
			if ext != ".ivecs" {
				_, err = Read(p, 3, Queries)
				named(err, p, "Read")
			}
			_, _, err = CheckVecs(bytes.NewReader(c.b), int64(len(c.b)), "v"+ext, elem)
			named(err, "v"+ext, "CheckVecs")
		}
		d, n, err := CheckVecs(bytes.NewReader(good), int64(len(good)), "v", elem)
		require.NoError(t, err, ext)
		assert.Equal(t, 32, d)
		assert.EqualValues(t, 2000, n)
	}
}

// TestCheckVecsChunks: CheckVecs finds a bad header in any chunk of its
// sequential pass (the first, past a chunk boundary, the last) and, for
// records of bigRecord bytes and more, read header by header.
func TestCheckVecsChunks(t *testing.T) {
	per := scanChunk / (4 + 32*4)
	n := 2*per + 100
	for _, bad := range []int{1, per - 1, per, per + 1, 2 * per, n - 1} {
		b := vecsFile(".fvecs", n, 32, map[int]int32{bad: 64})
		_, _, err := CheckVecs(bytes.NewReader(b), int64(len(b)), "v.fvecs", 4)
		assert.EqualError(t, err, fmt.Sprintf("v.fvecs: record %d says d=64, the first says d=32", bad))
	}
	big := bigRecord / 4
	for _, bad := range []int{1, 7, 9} {
		b := vecsFile(".fvecs", 10, big, map[int]int32{bad: 3})
		_, _, err := CheckVecs(bytes.NewReader(b), int64(len(b)), "v.fvecs", 4)
		assert.EqualError(t, err, fmt.Sprintf("v.fvecs: record %d says d=3, the first says d=%d", bad, big))
	}
	b := vecsFile(".fvecs", 10, big, nil)
	d, cnt, err := CheckVecs(bytes.NewReader(b), int64(len(b)), "v.fvecs", 4)
	require.NoError(t, err)
	assert.Equal(t, big, d)
	assert.EqualValues(t, 10, cnt)
}

// npyRaw is a .npy file of version major.minor with header h as given.
func npyRaw(major, minor byte, h string, data []byte) []byte {
	b := []byte{0x93, 'N', 'U', 'M', 'P', 'Y', major, minor}
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
	}
	return append(append(b, h...), data...)
}

// TestNpyHeader: a .npy header is read whole and strictly: version,
// header length, exactly the three keys, a supported dtype with its byte
// order, C order, and a shape that is the data's size exactly; anything
// else is refused naming the file and never quoting its bytes.
func TestNpyHeader(t *testing.T) {
	const ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	data := make([]byte, 24)
	m, err := Parse("q.npy", npyRaw(1, 0, ok+"   \n", data))
	require.NoError(t, err)
	assert.Equal(t, 2, m.N)
	assert.Equal(t, 3, m.Dim)
	for _, v := range [][2]byte{{2, 0}, {3, 0}} {
		_, err := Parse("q.npy", npyRaw(v[0], v[1], ok+"\n", data))
		assert.NoError(t, err, "version %v", v)
	}
	m, err = Parse("q.npy", npyRaw(1, 0, `{"shape": (3,), "fortran_order": False, "descr": "|u1"}`, data[:3]))
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0}, m.U8)

	for _, c := range []struct {
		name string
		b    []byte
		msg  string
	}{
		{"f8", npy("<f8", "(2, 3)", make([]byte, 48)), "dtype <f8 is not supported; the dtypes read are float32 (<f4), uint8 (|u1), int32 (<i4) or int64 (<i8)"},
		{"big-endian", npy(">f4", "(2, 3)", data), "dtype >f4 is big-endian"},
		{"native order", npy("=f4", "(2, 3)", data), "dtype =f4 is not supported"},
		{"u1 with an order", npy("<u2", "(2, 3)", make([]byte, 12)), "dtype <u2 is not supported"},
		{"structured", npyRaw(1, 0, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", data), "descr that is not a type string"},
		{"fortran", npyRaw(1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data), "Fortran-order (column-major) arrays are not supported"},
		{"order word", npyRaw(1, 0, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", data), "fortran_order that is neither True nor False"},
		{"shape vs size", npy("<f4", "(3, 3)", data), "shape [3 3] needs 36 bytes of data, the file has 24"},
		{"data past the shape", npy("<f4", "(1, 3)", data), "shape [1 3] needs 12 bytes of data, the file has 24"},
		{"3-D", npy("<f4", "(1, 2, 3)", data), "want a 1-D or 2-D array"},
		{"negative shape", npy("<f4", "(-2, 3)", data), "shape that is not a tuple of integers"},
		{"shape overflow", npy("<f4", "(99999999999, 3)", data), "shape that is not a tuple of integers"},
		{"huge shape", npy("<f4", "(2147483648, 2147483648)", data), "is too large"},
		{"header past the end", npyRaw(1, 0, ok, data)[:40], "header of 59 bytes runs past the end of the file"},
		{"header length over", append(npyRaw(2, 0, ok, data)[:8], 0, 0, 1, 0), "a .npy header of 65536 bytes"},
		{"short v2", []byte("\x93NUMPY\x02\x00\x10\x00"), "truncated .npy header"},
		{"version 4", npyRaw(4, 0, ok, data), ".npy format version 4.0 is not supported (1.0, 2.0 or 3.0)"},
		{"version 1.1", npyRaw(1, 1, ok, data), ".npy format version 1.1 is not supported"},
		{"extra key", npyRaw(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'root:x:0': 1}", data), "key other than descr, fortran_order and shape"},
		{"key twice", npyRaw(1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", data), "names descr twice"},
		{"no shape", npyRaw(1, 0, "{'descr': '<f4', 'fortran_order': False}", data), "lacks shape"},
		{"trailing bytes", npyRaw(1, 0, ok+" root:x:0:0\n", data), "has bytes after its dict"},
		{"not a dict", npyRaw(1, 0, "root:x:0:0:root:/root:/bin/bash\n", data), "is not a Python dict"},
		{"odd dtype", npyRaw(1, 0, "{'descr': 'root:x:0', 'fortran_order': False, 'shape': (2, 3)}", data), "its dtype is not a simple NumPy type string"},
		{"magic", []byte("root:x:0:0:root:/root:/bin/bash\n"), "not a .npy file"},
	} {
		_, err := Parse("q.npy", c.b)
		require.ErrorIs(t, err, ErrFormat, c.name)
		assert.ErrorContains(t, err, "q.npy: ", c.name)
		assert.ErrorContains(t, err, c.msg, c.name)
		assert.NotContains(t, err.Error(), "root", c.name)
		assert.NotContains(t, err.Error(), "vecio", c.name)
	}
}

// TestReadFormats: each use refuses the formats it does not take, saying
// which it takes, as its help lists them.
func TestReadFormats(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		f    Formats
		msg  string
	}{
		{"q.csv", Queries, "q.csv: queries are read from .fvecs, .bvecs or .npy files, not .csv"},
		{"q.ivecs", Queries, "queries are read from .fvecs, .bvecs or .npy files, not .ivecs"},
		{"q", Queries, "q: queries are read from .fvecs, .bvecs or .npy files; this name has no extension"},
		{"gt.fvecs", GroundTruth, "ground-truth ids are read from .ivecs or integer .npy files, not .fvecs"},
		{"ids.csv", IDs, "ids are read from .txt (one per line), .ivecs or integer .npy files, not .csv"},
		{"q.bvecs", FloatQueries, "float queries are read from .fvecs or float32 .npy files, not .bvecs"},
	} {
		p := filepath.Join(dir, c.name)
		require.NoError(t, os.WriteFile(p, fvecs([]float32{1}), 0o644))
		_, err := Read(p, 0, c.f)
		assert.ErrorContains(t, err, c.msg, c.name)
	}
	_, err := Parse("x.csv", nil)
	assert.EqualError(t, err, "x.csv: vector files are read from .fvecs, .bvecs, .ivecs, .npy or .txt files, not .csv")
}

// BenchmarkCheckVecs: the load-time pass over a vector file's headers
// (here 64 MiB of 128-d .fvecs in memory: the cost beside the I/O).
func BenchmarkCheckVecs(b *testing.B) {
	f := vecsFile(".fvecs", 64<<20/516, 128, nil)
	r := bytes.NewReader(f)
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		if _, _, err := CheckVecs(r, int64(len(f)), "v.fvecs", 4); err != nil {
			b.Fatal(err)
		}
	}
}

// eofAtEnd is a ReaderAt that returns io.EOF with a read that reaches the
// end of its bytes, as io.ReaderAt allows (an object store's reader may).
type eofAtEnd []byte

func (e eofAtEnd) ReadAt(p []byte, off int64) (int, error) {
	n, err := bytes.NewReader(e).ReadAt(p, off)
	if err == nil && off+int64(n) == int64(len(e)) {
		err = io.EOF
	}
	return n, err
}

// TestCheckVecsEOFAtEnd: a whole last read that comes with io.EOF is a
// success; a short one is not.
func TestCheckVecsEOFAtEnd(t *testing.T) {
	b := vecsFile(".fvecs", 10, 4, nil)
	d, n, err := CheckVecs(eofAtEnd(b), int64(len(b)), "v.fvecs", 4)
	require.NoError(t, err)
	assert.Equal(t, 4, d)
	assert.EqualValues(t, 10, n)
	_, _, err = CheckVecs(eofAtEnd(b[:len(b)-20]), int64(len(b)), "v.fvecs", 4)
	assert.ErrorIs(t, err, io.EOF)
	assert.ErrorContains(t, err, "v.fvecs: reading records from 0")
}
