package faissfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/internal/longtests"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name+".faiss"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func open(b []byte) (*File, error) { return Open(bytes.NewReader(b), int64(len(b))) }

func mustOpen(t testing.TB, b []byte) *File {
	t.Helper()
	f, err := open(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// cutPoints lists prefix lengths that end inside every field and section:
// every byte of a file of at most 4 KiB with -tags long; otherwise every
// byte of the first 256, each section's edges and middle, and in a small
// file every 16th byte besides (every byte of every small fixture is
// tens of seconds under -race).
func cutPoints(f *File, size int64) []int64 {
	var cuts []int64
	if size <= 4096 && longtests.On {
		for n := int64(0); n < size; n++ {
			cuts = append(cuts, n)
		}
		return cuts
	}
	for n := int64(0); n < 256; n++ {
		cuts = append(cuts, n)
	}
	if size <= 4096 {
		for n := int64(256); n < size; n += 16 {
			cuts = append(cuts, n)
		}
	}
	for x := f.Root; x != nil; x = x.Child {
		cuts = append(cuts, x.Off, x.Off+1, x.Off+5, x.End-1)
		for _, s := range x.Sections {
			cuts = append(cuts, s.Offset-8, s.Offset-1, s.Offset, s.Offset+1, s.Offset+s.Len/2, s.Offset+s.Len-1)
		}
	}
	return cuts
}

func TestTruncationInsideEverySection(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.exp.Unsupported != "" {
			continue
		}
		f := mustOpen(t, fx.data)
		size := int64(len(fx.data))
		for _, n := range cutPoints(f, size) {
			if n < 0 || n >= size {
				continue
			}
			_, err := open(fx.data[:n])
			want := ErrTruncated
			if f.Footer != nil && n >= f.Footer.Off {
				want = ErrFormat // only part of the footer is gone: trailing bytes after the index
			}
			if !errors.Is(err, want) {
				t.Fatalf("%s cut at %d of %d: err = %v, want %v", fx.name, n, size, err, want)
			}
		}
	}
}

func putU32(b []byte, off int64, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func putU64(b []byte, off int64, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }

// TestCorruptFields patches one field of a FAISS-written file and checks the
// error kind and the sentence a person reads.
func TestCorruptFields(t *testing.T) {
	ex := readFixture(t, "worked_example") // IxMp(IHNf(d=2,M=2)), 3 vectors, byte map in docs/faiss-format.md §5
	bin := readFixture(t, "bin_idmap_hnsw")
	sq := readFixture(t, "sq_8bit")
	binF := mustOpen(t, bin)
	cases := []struct {
		name  string
		src   []byte
		patch func(b []byte) []byte
		kind  error
		msg   string
	}{
		{"fourcc IVF", ex, func(b []byte) []byte { copy(b, "IwFl"); return b }, ErrUnsupported, `unsupported FAISS index type "IwFl" at byte 0`},
		{"fourcc IVF named", ex, func(b []byte) []byte { copy(b, "IwPQ"); return b }, ErrUnsupported, `unsupported FAISS index type "IwPQ" at byte 0 (IndexIVFPQ: not an HNSW index)`},
		{"fourcc garbage", ex, func(b []byte) []byte { copy(b, "\x00\x01\x02\x03"); return b }, ErrUnsupported, `not a FAISS index file: its first 4 bytes are no FAISS index type`},
		{"fourcc text", ex, func(b []byte) []byte { copy(b, "# fa"); return b }, ErrUnsupported, `not a FAISS index file`},
		{"nested fourcc garbage", ex, func(b []byte) []byte { copy(b[37:], "root"); return b }, ErrUnsupported, `unknown FAISS index type at byte 37 (the file is corrupt)`},
		{"null storage", ex, func(b []byte) []byte { copy(b[626:], "null"); return b }, ErrUnsupported, `"null" at byte 626 (the vectors were left out`},
		{"binary in float", ex, func(b []byte) []byte { copy(b[37:], "IBHf"); return b }, ErrUnsupported, `"IBHf" at byte 37`},
		{"huge levels count", ex, func(b []byte) []byte { putU64(b, 442, 1<<62); return b }, ErrTruncated, "levels needs 4611686018427387904×4 bytes at offset 450"},
		{"huge probas count", ex, func(b []byte) []byte { putU64(b, 74, 1<<40); return b }, ErrTruncated, "hnsw.assign_probas needs 8796093022208 bytes at offset 82"},
		{"levels count vs ntotal", ex, func(b []byte) []byte { putU64(b, 442, 2); return b }, ErrInvalid, "levels at byte 442 has 2 entries, expected ntotal = 3"},
		{"entry point out of range", ex, func(b []byte) []byte { putU32(b, 606, 3); return b }, ErrInvalid, "entry_point 3 at byte 606 is out of range [0, 3)"},
		{"entry point negative", ex, func(b []byte) []byte { putU32(b, 606, 0xffffff00); return b }, ErrInvalid, "entry_point -256 at byte 606"},
		{"max level too high", ex, func(b []byte) []byte { putU32(b, 610, 4); return b }, ErrInvalid, "max_level 4 at byte 610 is out of range [0, 3]"},
		{"upper beam 0", ex, func(b []byte) []byte { putU32(b, 622, 0); return b }, ErrInvalid, "upper_beam 0 at byte 622"},
		{"inconsistent ntotal", ex, func(b []byte) []byte { putU64(b, 8, 4); return b }, ErrInvalid, "IHNf at byte 37 has ntotal=3 but its parent IxMp at byte 0 has ntotal=4"},
		{"storage d", ex, func(b []byte) []byte { putU32(b, 630, 3); putU64(b, 663, 9); return b }, ErrInvalid, "IxF2 at byte 626 has d=3 but its parent IHNf at byte 37 has d=2"},
		{"storage codes", ex, func(b []byte) []byte { putU64(b, 663, 5); return b }, ErrInvalid, "IxF2 vectors at byte 663 hold 5 floats, expected ntotal·d = 3·2"},
		{"negative ntotal", ex, func(b []byte) []byte { putU64(b, 8, 1<<63); return b }, ErrInvalid, "ntotal=-9223372036854775808 at byte 8 is negative"},
		{"level 0", ex, func(b []byte) []byte { putU32(b, 458, 0); return b }, ErrInvalid, "levels[2]=0 at byte 458 is out of range [1, 30)"},
		{"level vs offsets", ex, func(b []byte) []byte { putU32(b, 450, 3); return b }, ErrInvalid, "offsets[1]=10 at byte 478 disagrees with levels, which give 8"},
		{"offsets patched", ex, func(b []byte) []byte { putU64(b, 486, 21); return b }, ErrInvalid, "offsets[2]=21 at byte 486"},
		{"cum[0] not 0", ex, func(b []byte) []byte { putU32(b, 322, 1); return b }, ErrInvalid, "cum_nneighbor_per_level[0] at byte 322 is 1, expected 0"},
		{"cum decreasing", ex, func(b []byte) []byte { putU32(b, 330, 1); return b }, ErrInvalid, "cum_nneighbor_per_level[2]=1 at byte 330 is smaller than the previous entry 4"},
		{"is_trained 2", ex, func(b []byte) []byte { b[32] = 2; return b }, ErrInvalid, "is_trained at byte 32 is 2"},
		{"unknown metric", ex, func(b []byte) []byte { putU32(b, 33, 99); return b }, ErrInvalid, "metric_type 99 at byte 33"},
		{"metric mismatch", ex, func(b []byte) []byte { putU32(b, 70, 0); return b }, ErrInvalid, "IxF2 at byte 626 has metric L2 but its parent IHNf at byte 37 has metric IP"},
		{"d zero", ex, func(b []byte) []byte { putU32(b, 4, 0); return b }, ErrInvalid, "IxMp dimension d=0 at byte 4 is out of range"},
		{"d huge", ex, func(b []byte) []byte { putU32(b, 4, 1<<21); return b }, ErrInvalid, "d=2097152"},
		{"id map short", ex, func(b []byte) []byte { putU64(b, 695, 2); return b[:len(b)-8] }, ErrInvalid, "IxMp id_map at byte 695 has 2 entries, expected ntotal = 3"},
		{"trailing garbage", ex, func(b []byte) []byte { return append(b, 0) }, ErrInvalid, "1 unexpected bytes after the index, which ends at byte 727"},
		{"binary code_size", bin, func(b []byte) []byte { putU32(b, binF.Graph.Off+8, 7); return b }, ErrInvalid, "IBHf code_size 7"},
		{"binary d not multiple of 8", bin, func(b []byte) []byte { putU32(b, 4, 63); return b }, ErrInvalid, "d=63 bits"},
		{"sq qtype 9", sq, func(b []byte) []byte { putU32(b, 37, 9); return b }, ErrInvalid, "scalar quantizer type 9 at byte 37 is not supported"},
		{"sq code_size", sq, func(b []byte) []byte { putU64(b, 57, 14); return b }, ErrInvalid, "code_size 14 at byte 57, expected 15 for 8bit with d=15"},
		{"sq d", sq, func(b []byte) []byte { putU64(b, 49, 16); return b }, ErrInvalid, "scalar quantizer d=16 at byte 49 disagrees with the header's d=15"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.patch(bytes.Clone(tc.src))
			_, err := open(b)
			if !errors.Is(err, tc.kind) || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v\nwant kind %v containing %q", err, tc.kind, tc.msg)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Field == "" || fe.Off < 0 || fe.Off > int64(len(b)) {
				t.Fatalf("not a FormatError with field and offset: %#v", err)
			}
		})
	}
}

// TestVerifyFindsViolations patches the big sections, which Open does not
// read, and checks Verify reports each problem with its position.
func TestVerifyFindsViolations(t *testing.T) {
	src := readFixture(t, "hnsw_flat_ip") // 300 vectors, M=8
	f := mustOpen(t, src)
	h := f.Graph.HNSW
	slot := func(node int32, l, k int) int64 {
		b, _ := h.NeighborSlots(node, l)
		return h.Neighbors.Offset + (b+int64(k))*4
	}
	firstPad := func(node int32, l int) int {
		b, e := h.NeighborSlots(node, l)
		for s := b; s < e; s++ {
			if int32(binary.LittleEndian.Uint32(src[h.Neighbors.Offset+s*4:])) < 0 {
				return int(s - b)
			}
		}
		return -1
	}
	var lvl0Only int32 = -1
	for i := int32(0); i < 300; i++ {
		if p := firstPad(i, 0); h.NumLevels(i) == 1 && p >= 0 && p < 14 {
			lvl0Only = i
			break
		}
	}
	if lvl0Only < 0 {
		t.Fatal("fixture has no level-0 node with two padding slots")
	}
	var upper int32 = -1
	for i := int32(0); i < 300; i++ {
		if h.NumLevels(i) >= 2 && i != h.EntryPoint {
			upper = i
			break
		}
	}
	cases := []struct {
		name  string
		patch func(b []byte)
		kind  string
		msg   string
	}{
		{"out of range", func(b []byte) { putU32(b, slot(20, 0, 0), 305) }, "neighbor_range", "neighbor id 305 at node 20 level 0 is out of range [0, 300)"},
		{"below -1", func(b []byte) { putU32(b, slot(20, 0, 1), 0xfffffffe) }, "neighbor_range", "neighbor id -2 at node 20 level 0"},
		{"after padding", func(b []byte) { putU32(b, slot(lvl0Only, 0, firstPad(lvl0Only, 0)+1), 1) }, "padding", "follows a -1 padding slot"},
		{"level of neighbor", func(b []byte) { putU32(b, slot(upper, 1, 0), uint32(lvl0Only)) }, "neighbor_level", "is not on level 1 (its top level is 0)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(src)
			tc.patch(b)
			f2, err := open(b)
			if err != nil {
				t.Fatalf("Open must not read the neighbors: %v", err)
			}
			rep, err := Verify(bytes.NewReader(b), f2, VerifyOptions{Reachability: true})
			if err != nil {
				t.Fatal(err)
			}
			if rep.NViolations != 1 || rep.Violations[0].Kind != tc.kind || !strings.Contains(rep.Violations[0].Msg, tc.msg) {
				t.Fatalf("violations %+v, want one %s containing %q", rep.Violations, tc.kind, tc.msg)
			}
		})
	}

	t.Run("duplicate ids in IxM2", func(t *testing.T) {
		b := readFixture(t, "idmap2_hnsw")
		f := mustOpen(t, b)
		s, _ := f.IDMap.Section("id_map")
		copy(b[s.Offset+8*7:], b[s.Offset+8*3:s.Offset+8*4])
		rep, err := Verify(bytes.NewReader(b), f, VerifyOptions{})
		if err != nil || rep.NViolations != 1 || !strings.Contains(rep.Violations[0].Msg, "id_map[7]") || !strings.Contains(rep.Violations[0].Msg, "repeats id_map[3]") {
			t.Fatalf("%v %+v", err, rep.Violations)
		}
	})
	t.Run("non-finite vector", func(t *testing.T) {
		b := readFixture(t, "flat_l2")
		f := mustOpen(t, b)
		s, _ := f.Storage.Section("codes")
		putU32(b, s.Offset+4*(16*5+3), 0x7fc00000)
		rep, err := Verify(bytes.NewReader(b), f, VerifyOptions{})
		if err != nil || rep.NViolations != 1 || !strings.Contains(rep.Violations[0].Msg, "vector 5 component 3 is NaN") {
			t.Fatalf("%v %+v", err, rep.Violations)
		}
	})
	t.Run("footer crc", func(t *testing.T) {
		b := readFixture(t, "opensearch_0_165_vec")
		f := mustOpen(t, b)
		s, _ := f.Storage.Section("codes")
		b[s.Offset+1] ^= 0x40
		rep, err := Verify(bytes.NewReader(b), f, VerifyOptions{})
		if err != nil || rep.NViolations != 1 || rep.Violations[0].Kind != "footer_crc" || *rep.FooterCRCOK {
			t.Fatalf("%v %+v", err, rep.Violations)
		}
	})
	t.Run("unreachable node", func(t *testing.T) {
		// Redirect every link to one node to the entry point: that node (and
		// any node reachable only through it) becomes unreachable.
		b := bytes.Clone(src)
		target := lvl0Only
		for i := int64(0); i < h.Neighbors.Count(); i++ {
			off := h.Neighbors.Offset + i*4
			if int32(binary.LittleEndian.Uint32(b[off:])) == target {
				putU32(b, off, uint32(h.EntryPoint))
			}
		}
		rep, err := Verify(bytes.NewReader(b), mustOpen(t, b), VerifyOptions{Reachability: true})
		if err != nil || rep.Unreachable < 1 || !slices.Contains(rep.UnreachableIDs, int64(target)) {
			t.Fatalf("%v unreachable %d %v, want %d among them", err, rep.Unreachable, rep.UnreachableIDs, target)
		}
	})
}
