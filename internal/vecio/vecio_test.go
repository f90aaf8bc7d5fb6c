package vecio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
		{"q.fvecs", fvecs([]float32{1, 2})[:9], "dimension 2 does not fit"},
		{"q.fvecs", append(fvecs([]float32{1, 2}), fvecs([]float32{1})...), "row 1 at byte 12 has dimension 1, row 0 has 2"},
		{"q.fvecs", []byte{0xff, 0xff, 0xff, 0x7f}, "dimension 2147483647 does not fit"},
		{"q.npy", npy("<f8", "(1, 2)", make([]byte, 16)), "dtype f8 is not supported"},
		{"q.npy", npy("<f4", "(3, 2)", make([]byte, 16)), "needs 24 bytes of data"},
		{"q.npy", []byte("garbage"), "bad magic"},
		{"ids.txt", []byte("1\nx\n"), `line 2: "x" is not an integer id`},
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
	f.Fuzz(func(t *testing.T, ext string, b []byte) {
		m, err := Parse("x"+ext, b)
		if err != nil {
			return
		}
		if got := len(m.F32) + len(m.U8) + len(m.I64); got != m.N*m.Dim {
			t.Fatalf("%d values for %d×%d", got, m.N, m.Dim)
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
