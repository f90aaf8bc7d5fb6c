package faissfmt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to Open and, when it accepts them, to
// Verify and every graph accessor. Seeds: every fixture, plus any crasher
// go test -fuzz keeps in testdata/fuzz/FuzzOpen (none so far). Neither may panic, and an accepted file must keep
// all its sections inside the file.
func FuzzOpen(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(fixtureDir, "*.faiss"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) <= 1<<17 { // the fuzzer mutates small inputs far better
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for x := file.Root; x != nil; x = x.Child {
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
					want = "faissfmt: " + v.Msg
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
