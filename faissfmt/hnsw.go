package faissfmt

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// HNSW is the graph block of IHNf, IHNs, IBHf, IHc2, IHNc and IBHc
// (docs/faiss-format.md §4).
// Small arrays are in memory; levels, offsets and neighbors stay on disk as
// Sections. Per-node offsets and levels are answered from a compact table
// derived from levels at open (about 0.2 bytes per node plus 9 bytes per
// node above level 0), checked against the stored offsets.
type HNSW struct {
	AssignProbas   []float64
	CumNeighbors   []int32 // cum_nneighbor_per_level, starts at 0, non-decreasing
	EntryPoint     int32   // -1 when empty
	MaxLevel       int32   // -1 when empty
	EfConstruction int32
	EfSearch       int32
	UpperBeam      int32
	Levels         Section
	Offsets        Section
	Neighbors      Section
	// LevelsHistogram[l] is the number of nodes whose top level is l.
	LevelsHistogram []int64

	nodes nodeTable
}

// M is the number of neighbor slots per node on levels ≥ 1.
func (h *HNSW) M() int {
	c := h.CumNeighbors
	if len(c) >= 3 {
		return int(c[2] - c[1])
	}
	if len(c) == 2 {
		return int(c[1] / 2)
	}
	return 0
}

// NumLevels returns levels[i]: node i exists on levels 0 … NumLevels(i)−1.
// i must be in [0, ntotal).
func (h *HNSW) NumLevels(i int32) int { return h.nodes.levels(int64(i)) }

// NeighborSlots returns the slot range [begin, end) of node i's list on level
// l in the neighbors array (element indices, not bytes). The caller must
// ensure l < NumLevels(i); the list stops at its first negative entry.
func (h *HNSW) NeighborSlots(i int32, l int) (begin, end int64) {
	o := h.nodes.offset(int64(i))
	return o + int64(h.CumNeighbors[l]), o + int64(h.CumNeighbors[l+1])
}

// NodeOffset returns offsets[i] (in neighbor slots) for i in [0, ntotal].
func (h *HNSW) NodeOffset(i int64) int64 { return h.nodes.offset(i) }

func (h *HNSW) residentBytes() int64 {
	return int64(len(h.AssignProbas))*8 + int64(len(h.CumNeighbors))*4 + int64(len(h.LevelsHistogram))*8 + h.nodes.bytes()
}

// nodeTable answers offsets[i] and levels[i] in O(1) from a bitmap of the
// nodes above level 0 ("upper" nodes, levels[i] > 1), a rank per 64 nodes,
// and per upper node its level and the extra slots before it.
//
//	offsets[i] = i·cum[1] + extra[r],  r = number of upper nodes before i
type nodeTable struct {
	n      int64
	slots0 int64    // cum[1]: slots of a node that lives on level 0 only
	upper  []uint64 // bit i: levels[i] > 1
	rank   []uint32 // upper nodes before word w
	ulevel []uint8  // levels[] of the upper nodes, in node order
	extra  []int64  // extra[r] = Σ over the first r upper nodes of cum[levels]−cum[1]
}

func (t *nodeTable) rankOf(i int64) (r int64, isUpper bool) {
	w := i >> 6
	if w >= int64(len(t.upper)) {
		return int64(len(t.extra) - 1), false
	}
	bit := uint64(1) << uint(i&63)
	word := t.upper[w]
	return int64(t.rank[w]) + int64(bits.OnesCount64(word&(bit-1))), word&bit != 0
}

func (t *nodeTable) offset(i int64) int64 {
	r, _ := t.rankOf(i)
	return i*t.slots0 + t.extra[r]
}

func (t *nodeTable) levels(i int64) int {
	r, up := t.rankOf(i)
	if up {
		return int(t.ulevel[r])
	}
	return 1
}

func (t *nodeTable) bytes() int64 {
	return int64(len(t.upper))*8 + int64(len(t.rank))*4 + int64(len(t.ulevel)) + int64(len(t.extra))*8
}

// maxLevels bounds levels[i]; FAISS never builds more than ~30 levels.
const maxLevels = 255

// maxSmallArray bounds assign_probas and cum_nneighbor_per_level.
const maxSmallArray = 4096

// readHNSW parses the HNSW block at the cursor for an index of ntotal nodes.
func readHNSW(c *cursor, ntotal int64) (*HNSW, error) {
	h := &HNSW{}
	// assign_probas and cum_nneighbor_per_level: small, loaded.
	s, err := c.vec("hnsw.assign_probas", 8, false)
	if err != nil {
		return nil, err
	}
	if s.Count() > maxSmallArray {
		return nil, invalidf(s.Name, s.Offset-8, "hnsw.assign_probas has %d entries at byte %d, at most %d supported", s.Count(), s.Offset-8, maxSmallArray)
	}
	h.AssignProbas = make([]float64, s.Count())
	if err := c.stream(s, func(first int64, b []byte) error {
		for j := 0; j+8 <= len(b); j += 8 {
			h.AssignProbas[first+int64(j/8)] = math.Float64frombits(binary.LittleEndian.Uint64(b[j:]))
		}
		return nil
	}); err != nil {
		return nil, err
	}

	s, err = c.vec("hnsw.cum_nneighbor_per_level", 4, false)
	if err != nil {
		return nil, err
	}
	if s.Count() > maxSmallArray {
		return nil, invalidf(s.Name, s.Offset-8, "hnsw.cum_nneighbor_per_level has %d entries at byte %d, at most %d supported", s.Count(), s.Offset-8, maxSmallArray)
	}
	if s.Count() != int64(len(h.AssignProbas))+1 {
		return nil, invalidf(s.Name, s.Offset-8, "hnsw.cum_nneighbor_per_level at byte %d has %d entries, expected len(assign_probas)+1 = %d",
			s.Offset-8, s.Count(), len(h.AssignProbas)+1)
	}
	h.CumNeighbors = make([]int32, s.Count())
	if err := c.stream(s, func(first int64, b []byte) error {
		for j := 0; j+4 <= len(b); j += 4 {
			h.CumNeighbors[first+int64(j/4)] = int32(binary.LittleEndian.Uint32(b[j:]))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for l, v := range h.CumNeighbors {
		at := s.Offset + int64(l)*4
		if l == 0 && v != 0 {
			return nil, invalidf(s.Name, at, "hnsw.cum_nneighbor_per_level[0] at byte %d is %d, expected 0", at, v)
		}
		if l > 0 && v < h.CumNeighbors[l-1] {
			return nil, invalidf(s.Name, at, "hnsw.cum_nneighbor_per_level[%d]=%d at byte %d is smaller than the previous entry %d",
				l, v, at, h.CumNeighbors[l-1])
		}
	}
	if ntotal > 0 && len(h.CumNeighbors) < 2 {
		return nil, invalidf(s.Name, s.Offset-8, "hnsw.cum_nneighbor_per_level at byte %d has %d entries; an index with vectors needs at least 2", s.Offset-8, len(h.CumNeighbors))
	}

	// levels, offsets and the neighbors' count: one read when the window
	// allows (OpenOptions.Window), their sizes being ntotal and ntotal+1.
	c.span(8 + 4*ntotal + 8 + 8*(ntotal+1) + 8)
	defer c.unspan()
	// levels: streamed once to build the node table and the histogram.
	if h.Levels, err = c.vec("levels", 4, false); err != nil {
		return nil, err
	}
	if h.Levels.Count() != ntotal {
		return nil, invalidf("levels", h.Levels.Offset-8, "hnsw levels at byte %d has %d entries, expected ntotal = %d", h.Levels.Offset-8, h.Levels.Count(), ntotal)
	}
	if err := h.buildNodes(c, ntotal); err != nil {
		return nil, err
	}

	// offsets: streamed once and checked against the table.
	if h.Offsets, err = c.vec("offsets", 8, false); err != nil {
		return nil, err
	}
	if h.Offsets.Count() != ntotal+1 {
		return nil, invalidf("offsets", h.Offsets.Offset-8, "hnsw offsets at byte %d has %d entries, expected ntotal+1 = %d", h.Offsets.Offset-8, h.Offsets.Count(), ntotal+1)
	}
	// Walk the table alongside: the expected offset is a running sum. Loop
	// state lives in locals (not captured variables) to keep this ~1 ns/node.
	var want, r int64
	t := &h.nodes
	if err := c.stream(h.Offsets, func(first int64, b []byte) error {
		w, rr, upper, ext, s0 := want, r, t.upper, t.extra, t.slots0
		for j := 0; j+8 <= len(b); j += 8 {
			i := first + int64(j>>3)
			if got := binary.LittleEndian.Uint64(b[j:]); got != uint64(w) {
				at := h.Offsets.Offset + i*8
				return invalidf("offsets", at, "hnsw offsets[%d]=%d at byte %d disagrees with levels, which give %d", i, got, at, w)
			}
			if i < ntotal { // branch-free: offsets[i+1] = (i+1)·cum[1] + extra[upper nodes ≤ i]
				rr += int64(upper[i>>6]>>uint(i&63)) & 1
				w = (i+1)*s0 + ext[rr]
			}
		}
		want, r = w, rr
		return nil
	}); err != nil {
		return nil, err
	}

	if h.Neighbors, err = c.vec("neighbors", 4, true); err != nil {
		return nil, err
	}
	c.unspan()
	if want := h.nodes.offset(ntotal); h.Neighbors.Count() != want {
		return nil, invalidf("neighbors", h.Neighbors.Offset-8, "hnsw neighbors at byte %d has %d entries, expected offsets[ntotal] = %d", h.Neighbors.Offset-8, h.Neighbors.Count(), want)
	}

	tail, err := c.read("hnsw.entry_point", 20)
	if err != nil {
		return nil, err
	}
	at := c.off - 20
	h.EntryPoint = int32(binary.LittleEndian.Uint32(tail[0:]))
	h.MaxLevel = int32(binary.LittleEndian.Uint32(tail[4:]))
	h.EfConstruction = int32(binary.LittleEndian.Uint32(tail[8:]))
	h.EfSearch = int32(binary.LittleEndian.Uint32(tail[12:]))
	h.UpperBeam = int32(binary.LittleEndian.Uint32(tail[16:]))
	if err := h.checkEntry(ntotal, at); err != nil {
		return nil, err
	}
	// Every search reads the entry point's lists: check them now.
	return h, h.checkEntryLists(c.r)
}

func (h *HNSW) buildNodes(c *cursor, ntotal int64) error {
	t := &h.nodes
	t.n = ntotal
	if ntotal > 0 {
		t.slots0 = int64(h.CumNeighbors[1])
	}
	words := (ntotal + 63) / 64
	t.upper = make([]uint64, words)
	t.rank = make([]uint32, words)
	// Size the upper-node arrays from the level distribution FAISS used
	// (assign_probas[0] = share of nodes on level 0 only), so appends rarely
	// grow them; a crafted file only costs a regrowth.
	guess := int64(64)
	if len(h.AssignProbas) > 0 {
		if p0 := h.AssignProbas[0]; p0 >= 0 && p0 <= 1 {
			guess += int64(float64(ntotal) * (1 - p0) * 1.05)
		}
	}
	guess = min(guess, ntotal+1)
	t.ulevel = make([]uint8, 0, guess)
	t.extra = append(make([]int64, 0, guess+1), 0)
	ncum := int64(len(h.CumNeighbors))
	limit := min(ncum, maxLevels+1) // valid levels are [1, limit)
	hist := make([]int64, max(limit-1, 0))
	var extra int64
	err := c.stream(h.Levels, func(first int64, b []byte) error {
		upper, rank, ulevel, ext, cum, s0 := t.upper, t.rank, t.ulevel, t.extra, h.CumNeighbors, t.slots0
		defer func() { t.ulevel, t.extra = ulevel, ext }()
		for j := 0; j+4 <= len(b); j += 4 {
			i := first + int64(j>>2)
			lv := int64(int32(binary.LittleEndian.Uint32(b[j:])))
			if uint64(lv-1) >= uint64(limit-1) {
				at := h.Levels.Offset + i*4
				return invalidf("levels", at, "hnsw levels[%d]=%d at byte %d is out of range [1, %d)", i, lv, at, limit)
			}
			if i&63 == 0 {
				rank[i>>6] = uint32(len(ulevel))
			}
			if lv > 1 { // rare (about 1/M of nodes); hist[0] is derived below
				hist[lv-1]++
				upper[i>>6] |= 1 << uint(i&63)
				ulevel = append(ulevel, uint8(lv))
				extra += int64(cum[lv]) - s0
				ext = append(ext, extra)
			}
		}
		return nil
	})
	if len(hist) > 0 {
		hist[0] = ntotal - int64(len(t.ulevel))
	}
	for len(hist) > 0 && hist[len(hist)-1] == 0 {
		hist = hist[:len(hist)-1]
	}
	h.LevelsHistogram = hist
	if len(t.ulevel) > math.MaxUint32 {
		return invalidf("levels", h.Levels.Offset, "too many upper-level nodes (%d)", len(t.ulevel))
	}
	return err
}

func (h *HNSW) checkEntry(ntotal, at int64) error {
	ep, ml := int64(h.EntryPoint), int64(h.MaxLevel)
	if ntotal == 0 {
		if ep != -1 || ml != -1 {
			return invalidf("hnsw.entry_point", at, "empty hnsw graph has entry_point %d and max_level %d at byte %d, expected -1 and -1", ep, ml, at)
		}
	} else {
		if ep < 0 || ep >= ntotal {
			return invalidf("hnsw.entry_point", at, "hnsw entry_point %d at byte %d is out of range [0, %d)", ep, at, ntotal)
		}
		if top := int64(h.nodes.levels(ep)) - 1; ml < 0 || ml > top {
			return invalidf("hnsw.max_level", at+4, "hnsw max_level %d at byte %d is out of range [0, %d] (the entry point's top level)", ml, at+4, top)
		}
	}
	if h.UpperBeam <= 0 {
		return invalidf("hnsw.upper_beam", at+16, "hnsw upper_beam %d at byte %d must be ≥ 1", h.UpperBeam, at+16)
	}
	return nil
}

func (h *HNSW) String() string {
	return fmt.Sprintf("HNSW{M=%d ep=%d max_level=%d efC=%d efS=%d}", h.M(), h.EntryPoint, h.MaxLevel, h.EfConstruction, h.EfSearch)
}
