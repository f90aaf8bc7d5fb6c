package faissfmt

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
)

// traceReader records every ReadAt.
type traceReader struct {
	r     io.ReaderAt
	mu    sync.Mutex
	reads [][2]int64 // offset, length
}

func (t *traceReader) ReadAt(p []byte, off int64) (int, error) {
	t.mu.Lock()
	t.reads = append(t.reads, [2]int64{off, int64(len(p))})
	t.mu.Unlock()
	return t.r.ReadAt(p, off)
}

// TestOpenReadsOnlyHeadersAndSmallArrays opens the largest fixture through a
// logging reader: no read may touch codes or the id map, the neighbors only
// in the entry point's lists on levels 0 … max_level (one read), and the
// bytes read are the headers, the small arrays, levels and offsets.
func TestOpenReadsOnlyHeadersAndSmallArrays(t *testing.T) {
	for _, name := range []string{"hnsw_flat_large", "opensearch_0_165_vec", "bin_idmap_hnsw", "hnsw_sq_8bit"} {
		t.Run(name, func(t *testing.T) {
			data := readFixture(t, name)
			tr := &traceReader{r: bytes.NewReader(data)}
			f, err := Open(tr, int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			var big []Section // recorded, never read at open
			var allowed int64 // levels + offsets are streamed once to validate them
			for x := f.Root; x != nil; x = x.Child {
				for _, s := range x.Sections {
					switch s.Name {
					case "levels", "offsets":
						allowed += s.Len
					default:
						big = append(big, s)
					}
				}
			}
			h := f.Graph.HNSW
			epFirst := h.Neighbors.Offset + 4*h.NodeOffset(int64(h.EntryPoint))
			epLists := [2]int64{epFirst, 4 * int64(h.CumNeighbors[h.MaxLevel+1])}
			epReads := 0
			var total int64
			for _, rd := range tr.reads {
				total += rd[1]
				if rd == epLists {
					epReads++
					continue
				}
				for _, s := range big {
					if rd[0] < s.Offset+s.Len && s.Offset < rd[0]+rd[1] {
						t.Errorf("read [%d, %d) touches section %s [%d, %d)", rd[0], rd[0]+rd[1], s.Name, s.Offset, s.Offset+s.Len)
					}
				}
			}
			var bigBytes int64
			for _, s := range big {
				bigBytes += s.Len
			}
			if epReads != 1 {
				t.Errorf("open read the entry point's lists [%d, +%d) %d times, want once", epLists[0], epLists[1], epReads)
			}
			// Headers and small arrays: a few KiB at most for these files.
			if total > allowed+epLists[1]+4096 {
				t.Errorf("open read %d bytes: levels+offsets are %d, the rest should be headers", total, allowed)
			}
			t.Logf("%s: %d reads, %d bytes read of %d (sections left on disk: %d bytes)", name, len(tr.reads), total, len(data), bigBytes)
			if bigBytes < int64(len(data))/2 {
				t.Errorf("fixture too small to show anything: %d of %d bytes in big sections", bigBytes, len(data))
			}
		})
	}
}

func ExampleOpen() {
	data := []byte{} // a FAISS file's bytes; any io.ReaderAt works
	_, err := Open(bytes.NewReader(data), int64(len(data)))
	fmt.Println(err)
	// Output: file truncated: fourcc needs 4 bytes at offset 0, 0 left
}
