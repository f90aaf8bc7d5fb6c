package faissfmt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to Open and OpenWith (null storage
// allowed) and, when they accept them, to Verify and every graph accessor.
// Seeds: every fixture (FAISS 1.7.3's and FAISS 1.15's), small CAGRA and
// null-storage variants of the 1.7.3 ones with truncated and corrupted
// copies (fuzzSeeds), plus any crasher go test -fuzz keeps in
// testdata/fuzz/FuzzOpen. Neither may panic, and an accepted
// file must keep all its sections inside the file. Run it with
// -fuzzminimizetime 1s: minimizing each multi-kilobyte input that finds new
// coverage otherwise takes the whole -fuzztime (0 execs/sec reported).
func FuzzOpen(f *testing.F) {
	for _, dir := range []string{fixtureDir, faiss115Dir} {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.faiss"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			// The fuzzer mutates small inputs far better; the FAISS 1.15
			// files (up to 544 KB) are the only real CAGRA and null ones.
			if len(b) <= 1<<17 || dir == faiss115Dir {
				f.Add(b)
			}
		}
	}
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			file, err = OpenWith(bytes.NewReader(data), int64(len(data)), OpenOptions{AllowNullStorage: true})
			if err != nil {
				return
			}
			if !file.VectorsMissing() || file.Storage != nil {
				t.Fatalf("only null storage separates Open from OpenWith: missing %v, storage %v", file.VectorsMissing(), file.Storage)
			}
		}
		for x := file.Root; x != nil; x = x.Child {
			if x.End < x.Off || x.End > int64(len(data)) {
				t.Fatalf("%s spans [%d, %d) in a %d-byte file", x.FourCC, x.Off, x.End, len(data))
			}
			if c := x.CAGRA; c != nil && (c.NumBaseLevelSearchEntrypoints < 1 || c.NumBaseLevelSearchEntrypoints > MaxCAGRAEntrypoints) {
				t.Fatalf("accepted CAGRA fields %+v", c)
			}
			for _, s := range x.Sections {
				if s.Offset < 0 || s.Len < 0 || s.Offset+s.Len > int64(len(data)) {
					t.Fatalf("section %+v outside a %d-byte file", s, len(data))
				}
			}
			if h := x.HNSW; h != nil {
				for i := int64(0); i < x.NTotal; i++ {
					for l := 0; l < h.NumLevels(int32(i)); l++ {
						b, e := h.NeighborSlots(int32(i), l)
						if b < 0 || e > h.Neighbors.Count() || b > e {
							t.Fatalf("node %d level %d slots [%d, %d) outside %d", i, l, b, e, h.Neighbors.Count())
						}
					}
				}
			}
		}
		rep, err := Verify(bytes.NewReader(data), file, VerifyOptions{Reachability: true})
		if err != nil {
			t.Fatalf("Verify failed on a file Open accepted: %v", err)
		}
		if g := file.Graph; g != nil {
			// The load check stops at Verify's first neighbor-list violation.
			h := g.HNSW
			e1 := h.CheckNeighbors(bytes.NewReader(data))
			e2 := h.CheckNeighborBytes(data[h.Neighbors.Offset : h.Neighbors.Offset+h.Neighbors.Len])
			want := ""
			for _, v := range rep.Violations {
				if v.Kind == "neighbor_range" || v.Kind == "padding" || v.Kind == "neighbor_level" {
					want = v.Msg
					break
				}
			}
			for _, e := range []error{e1, e2} {
				if got := fmt.Sprint(e); (e == nil) != (want == "") || (e != nil && got != want) {
					t.Fatalf("CheckNeighbors: %v; Verify's first neighbor violation: %q", e, want)
				}
			}
		}
	})
}

// fuzzSeeds are small CAGRA and null-storage files made from the FAISS
// 1.7.3 fixtures (the FAISS 1.15 files are large), each also cut inside
// its new fields and with those fields corrupted.
func fuzzSeeds(tb testing.TB) [][]byte {
	ex := readFixture(tb, "worked_example") // IxMp > IHNf > IxF2, 727 bytes
	exf := mustOpen(tb, ex)
	one := readFixture(tb, "hnsw_one")
	onef := mustOpen(tb, one)
	bin := readFixture(tb, "bin_hnsw")
	binf := mustOpen(tb, bin)
	seeds := [][]byte{
		toCAGRA(ex, exf.Graph, "IHc2", cagraFields(1, 0, 32, i32p(0))),
		toCAGRA(ex, exf.Graph, "IHNc", cagraFields(1, 1, 32, nil)),
		toCAGRA(one, onef.Graph, "IHc2", cagraFields(0, 1, 1, i32p(0))),
		toCAGRA(bin, binf.Graph, "IBHc", cagraFields(1, 0, 32, nil)),
		withNullStorage(ex, exf),
		withNullStorage(one, onef),
		withNullStorage(bin, binf),
	}
	var out [][]byte
	for _, b := range seeds {
		out = append(out, b)
		f, err := OpenWith(bytes.NewReader(b), int64(len(b)), OpenOptions{AllowNullStorage: true})
		if err != nil {
			tb.Fatalf("seed does not parse: %v", err)
		}
		g := f.Graph
		at := g.Off + 4 + 33 // the CAGRA fields, or the HNSW block
		if g.Binary {
			at = g.Off + 4 + 21
		}
		out = append(out, b[:at+3], b[:g.Child.Off+2])
		bad := bytes.Clone(b)
		bad[at], bad[at+2] = 2, 0xff // a bool 2; entrypoints or a vector count garbled
		out = append(out, bad)
	}
	return out
}
