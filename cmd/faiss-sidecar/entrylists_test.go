package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEntryPointListsCheckedAtOpen: an id listed on a level it does not
// reach, in the entry point's list (which every query reads), makes
// inspect and every load fail with one line naming node, level and slot.
func TestEntryPointListsCheckedAtOpen(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	require.NoError(t, err)
	f, err := faissfmt.Open(bytes.NewReader(src), int64(len(src)))
	require.NoError(t, err)
	h := f.Graph.HNSW
	var low int32 // a node on level 0 only
	for h.NumLevels(low) != 1 {
		low++
	}
	b := bytes.Clone(src)
	lo, _ := h.NeighborSlots(h.EntryPoint, 1)
	binary.LittleEndian.PutUint32(b[h.Neighbors.Offset+4*(lo+1):], uint32(low))
	p := filepath.Join(t.TempDir(), "ep.faiss")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	want := fmt.Sprintf("neighbor id %d at node %d level 1 is not on level 1 (its top level is 0) (slot 1, byte %d)",
		low, h.EntryPoint, h.Neighbors.Offset+4*(lo+1))
	q := writeQueries(t, loadSearchFixture(t, "hnsw_flat_l2"))
	for _, args := range [][]string{
		{"inspect", p},
		{"search", p, "--queries", q},
		{"search", p, "--queries", q, "--mode", "full"},
		{"bench", p, "--queries", q, "--duration", "10ms"},
	} {
		code, _, errOut := runCLI(args...)
		assert.Equal(t, 1, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, want, "%v", args)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "%v: one line: %q", args, errOut)
	}
}
