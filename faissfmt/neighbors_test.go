package faissfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slotAt is the byte offset of slot k of node's list on level l.
func slotAt(h *HNSW, node int32, l, k int) int64 {
	b, _ := h.NeighborSlots(node, l)
	return h.Neighbors.Offset + (b+int64(k))*4
}

func slotID(b []byte, off int64) int32 { return int32(binary.LittleEndian.Uint32(b[off:])) }

// TestOpenChecksEntryPointLists corrupts the entry point's lists, which
// every search reads: Open must refuse each copy with an ErrFormat error
// naming node, level and slot (and the byte), on every level it searches.
func TestOpenChecksEntryPointLists(t *testing.T) {
	src := readFixture(t, "hnsw_flat_ip") // 300 vectors, M=8, entry point 239, max_level 2
	f := mustOpen(t, src)
	h := f.Graph.HNSW
	ep := h.EntryPoint
	require.Equal(t, int32(2), h.MaxLevel)
	var lvl0Only int32 = -1 // a node on level 0 only
	for i := int32(0); i < 300 && lvl0Only < 0; i++ {
		if h.NumLevels(i) == 1 {
			lvl0Only = i
		}
	}
	var onLevel1 int32 = -1 // a node whose top level is 1
	for i := int32(0); i < 300 && onLevel1 < 0; i++ {
		if h.NumLevels(i) == 2 {
			onLevel1 = i
		}
	}
	require.True(t, lvl0Only >= 0 && onLevel1 >= 0)
	// Padding needs a real id after the -1: slot 1 of level 0 holds one.
	require.GreaterOrEqual(t, slotID(src, slotAt(h, ep, 0, 1)), int32(0))

	type patch struct{ l, k, id int }
	cases := []struct {
		name    string
		patches []patch
		msg     string // without the byte, added below
		at      patch  // the slot the error names
	}{
		{"level 0 out of range", []patch{{0, 0, 300}}, "neighbor id 300 at node 239 level 0 is out of range [0, 300) (slot 0", patch{0, 0, 0}},
		{"level 0 below -1", []patch{{0, 3, -2}}, "neighbor id -2 at node 239 level 0 is out of range [0, 300) (slot 3", patch{0, 3, 0}},
		{"level 0 padding not trailing", []patch{{0, 0, -1}}, "at node 239 level 0 follows a -1 padding slot (slot 1", patch{0, 1, 0}},
		{"level 1 out of range", []patch{{1, 2, 1 << 30}}, "neighbor id 1073741824 at node 239 level 1 is out of range [0, 300) (slot 2", patch{1, 2, 0}},
		{"level 1 not on level", []patch{{1, 0, int(lvl0Only)}}, fmt.Sprintf("neighbor id %d at node 239 level 1 is not on level 1 (its top level is 0) (slot 0", lvl0Only), patch{1, 0, 0}},
		{"level 2 not on level", []patch{{2, 0, int(onLevel1)}}, fmt.Sprintf("neighbor id %d at node 239 level 2 is not on level 2 (its top level is 1) (slot 0", onLevel1), patch{2, 0, 0}},
		{"level 2 padding not trailing", []patch{{2, 0, -1}, {2, 1, int(ep)}}, "neighbor id 239 at node 239 level 2 follows a -1 padding slot (slot 1", patch{2, 1, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(src)
			for _, p := range tc.patches {
				putU32(b, slotAt(h, ep, p.l, p.k), uint32(int32(p.id)))
			}
			_, err := open(b)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrFormat)
			assert.ErrorIs(t, err, ErrInvalid)
			at := slotAt(h, ep, tc.at.l, tc.at.k)
			assert.Contains(t, err.Error(), fmt.Sprintf("%s, byte %d)", tc.msg, at))
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "neighbors", fe.Field)
			assert.Equal(t, at, fe.Off)
		})
	}

	t.Run("other nodes' lists are not read", func(t *testing.T) {
		b := bytes.Clone(src)
		putU32(b, slotAt(h, lvl0Only, 0, 0), 300)
		_, err := open(b)
		require.NoError(t, err)
	})
	t.Run("levels above max_level are not searched", func(t *testing.T) {
		// worked_example: entry point 1 lives on levels 0-3, max_level 3;
		// lower max_level to 1 and break the level-2 list.
		w := readFixture(t, "worked_example")
		putU32(w, 610, 1)
		wf := mustOpen(t, w)
		putU32(w, slotAt(wf.Graph.HNSW, 1, 2, 0), 7)
		_, err := open(w)
		require.NoError(t, err)
		putU32(w, slotAt(wf.Graph.HNSW, 1, 1, 0), 7)
		_, err = open(w)
		require.ErrorIs(t, err, ErrFormat)
		assert.Contains(t, err.Error(), "neighbor id 7 at node 1 level 1 is out of range [0, 3) (slot 0")
	})
}

// TestCheckNeighbors: every list of every FAISS-written fixture passes; a
// violation anywhere is the same first violation Verify reports, from both
// the streaming and the in-memory check.
func TestCheckNeighbors(t *testing.T) {
	checked := 0
	for _, fx := range loadFixtures(t) {
		if fx.exp.Unsupported != "" {
			continue
		}
		f := mustOpen(t, fx.data)
		if f.Graph == nil {
			continue
		}
		h := f.Graph.HNSW
		require.NoError(t, h.CheckNeighbors(bytes.NewReader(fx.data)), fx.name)
		require.NoError(t, h.CheckNeighborBytes(fx.data[h.Neighbors.Offset:h.Neighbors.Offset+h.Neighbors.Len]), fx.name)
		checked++
	}
	require.Greater(t, checked, 20)

	src := readFixture(t, "hnsw_flat_large") // 3000 nodes, M=16, max_level 3
	f := mustOpen(t, src)
	h := f.Graph.HNSW
	var upper, last int32 = -1, 2999
	for i := int32(2999); i >= 0 && upper < 0; i-- {
		if h.NumLevels(i) >= 3 && i != h.EntryPoint {
			upper = i
		}
	}
	require.GreaterOrEqual(t, upper, int32(0))
	var lvl0Only int32 = -1
	for i := int32(0); lvl0Only < 0; i++ {
		if h.NumLevels(i) == 1 {
			lvl0Only = i
		}
	}
	cases := []struct {
		name  string
		patch func(b []byte)
		msg   string
	}{
		{"last node out of range", func(b []byte) { putU32(b, slotAt(h, last, 0, 5), 3000) }, "neighbor id 3000 at node 2999 level 0 is out of range [0, 3000) (slot 5"},
		{"level 2 not on level", func(b []byte) { putU32(b, slotAt(h, upper, 2, 0), uint32(lvl0Only)) }, fmt.Sprintf("at node %d level 2 is not on level 2 (its top level is 0) (slot 0", upper)},
		{"padding", func(b []byte) { putU32(b, slotAt(h, 17, 0, 0), 0xffffffff) }, "at node 17 level 0 follows a -1 padding slot (slot 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(src)
			tc.patch(b)
			f2, err := open(b)
			require.NoError(t, err, "the entry point's lists are intact")
			h2 := f2.Graph.HNSW
			e1 := h2.CheckNeighbors(bytes.NewReader(b))
			e2 := h2.CheckNeighborBytes(b[h2.Neighbors.Offset : h2.Neighbors.Offset+h2.Neighbors.Len])
			require.Error(t, e1)
			assert.ErrorIs(t, e1, ErrFormat)
			assert.ErrorIs(t, e1, ErrInvalid)
			assert.Contains(t, e1.Error(), tc.msg)
			assert.Equal(t, e1.Error(), e2.Error())
			rep, err := Verify(bytes.NewReader(b), f2, VerifyOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations)
			assert.Equal(t, rep.Violations[0].Msg, e1.Error(), "Verify and the load check word one rule alike")
		})
	}
	t.Run("small reads", func(t *testing.T) {
		// Chunks smaller than one record (128 bytes on level 0) and a few
		// records long: every byte read once, the same first violation.
		defer func(v int64) { checkChunk = v }(checkChunk)
		b := bytes.Clone(src)
		cases[0].patch(b)
		for _, c := range []int64{64, 1000, 4096} {
			checkChunk = c
			cr := &countingReader{r: bytes.NewReader(src)}
			require.NoError(t, h.CheckNeighbors(cr))
			assert.Equal(t, h.Neighbors.Len, cr.bytes, "every neighbor byte read once")
			assert.Greater(t, cr.reads, int(h.Neighbors.Len/max(c, 256)/2))
			err := h.CheckNeighbors(bytes.NewReader(b))
			require.Error(t, err)
			assert.Contains(t, err.Error(), cases[0].msg)
		}
	})
}

// TestCheckNeighborBytesParts: split across goroutines, the in-memory
// check still reports the first violation in file order, wherever the
// parts' boundaries fall.
func TestCheckNeighborBytesParts(t *testing.T) {
	defer func(v int64) { checkPartNodes = v }(checkPartNodes)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	src := readFixture(t, "hnsw_flat_large")
	f := mustOpen(t, src)
	h := f.Graph.HNSW
	nbOf := func(b []byte) []byte { return b[h.Neighbors.Offset : h.Neighbors.Offset+h.Neighbors.Len] }
	for _, procs := range []int{1, 3, 8} {
		runtime.GOMAXPROCS(procs)
		checkPartNodes = 100
		for _, nodes := range [][]int32{{2999}, {0}, {1499, 1500}, {2250, 751}, {1, 2998}} {
			b := bytes.Clone(src)
			for _, v := range nodes {
				putU32(b, slotAt(h, v, 0, 0), 5000)
			}
			err := h.CheckNeighborBytes(nbOf(b))
			first := slices.Min(nodes)
			require.Error(t, err, "procs %d nodes %v", procs, nodes)
			assert.Contains(t, err.Error(), fmt.Sprintf("neighbor id 5000 at node %d level 0", first), "procs %d", procs)
		}
		require.NoError(t, h.CheckNeighborBytes(nbOf(src)))
	}
}

type countingReader struct {
	r     *bytes.Reader
	bytes int64
	reads int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	c.bytes += int64(len(p))
	return c.r.ReadAt(p, off)
}

// TestCheckFooterCRC: the OpenSearch fixtures' footers check out; a flipped
// byte anywhere before the checksum, or a changed checksum, is an ErrFormat
// error naming the expected and the actual CRC, from the streaming and the
// in-memory check alike; plain FAISS files have nothing to check.
func TestCheckFooterCRC(t *testing.T) {
	for _, name := range []string{"opensearch_0_165_vec", "opensearch_0_165_bin"} {
		t.Run(name, func(t *testing.T) {
			src := readFixture(t, name)
			f := mustOpen(t, src)
			require.NotNil(t, f.Footer)
			require.NoError(t, CheckFooterCRC(bytes.NewReader(src), f))
			require.NoError(t, CheckFooterCRCBytes(src, f))

			s, _ := f.Storage.Section("codes")
			b := bytes.Clone(src)
			b[s.Offset+3] ^= 0x01
			want := fmt.Sprintf("Lucene footer checksum mismatch: the footer at byte %d expects CRC-32 %#08x, the file's first %d bytes have",
				f.Footer.Off+8, f.Footer.Checksum, f.Size-8)
			for _, err := range []error{CheckFooterCRC(bytes.NewReader(b), f), CheckFooterCRCBytes(b, f)} {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrFormat)
				assert.ErrorIs(t, err, ErrInvalid)
				assert.Contains(t, err.Error(), want)
			}
			crc, ok, err := VerifyFooterCRC(bytes.NewReader(b), f)
			require.NoError(t, err)
			require.False(t, ok)
			assert.Contains(t, CheckFooterCRC(bytes.NewReader(b), f).Error(), fmt.Sprintf("have %#08x", crc))

			c := bytes.Clone(src) // the stored checksum itself corrupted
			c[len(c)-1] ^= 0x80
			fc := mustOpen(t, c)
			err = CheckFooterCRC(bytes.NewReader(c), fc)
			require.ErrorIs(t, err, ErrFormat)
			assert.Contains(t, err.Error(), fmt.Sprintf("expects CRC-32 %#08x", fc.Footer.Checksum))
			assert.Contains(t, err.Error(), fmt.Sprintf("have %#08x", f.Footer.Checksum))
		})
	}
	plain := readFixture(t, "idmap_hnsw")
	pf := mustOpen(t, plain)
	require.NoError(t, CheckFooterCRC(bytes.NewReader(plain), pf))
	require.NoError(t, CheckFooterCRCBytes(plain, pf))
	short := readFixture(t, "opensearch_0_165_vec")
	sf := mustOpen(t, short)
	err := CheckFooterCRCBytes(short[:100], sf)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrFormat), "a caller's short buffer is not a format error")
}
