package hnswsearch

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/offheap"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/recordcache"
)

// pinnedLists holds neighbor lists in memory outside the Go heap, compacted:
// FAISS pads every level-0 list to 2M slots with −1, and on real graphs
// more than half of the slots are padding. A pinned node keeps only its
// level-0 list's valid prefix, then its upper levels' slots as stored
// (few nodes have any):
//
//	ids[start[v] : start[v]+len0[v]]            level 0, valid entries only
//	ids[start[v]+len0[v]+(s_l−s_1) : …+cap_l]   level l ≥ 1 (s_l: the level's
//	                                            slot offset in the node's record)
//
// A search stops at a list's end or its first −1, so the shortened level-0
// lists give the same traversal. Nodes not pinned have len0 = notPinned.
type pinnedLists struct {
	start []uint32 // n entries
	len0  []uint16 // n entries
	ids   []byte   // little-endian int32s
	mem   [3]offheap.Buf
	bytes int64 // memory held (touched pages of ids, start, len0)
}

const notPinned = math.MaxUint16

// list returns node v's pinned list on level l, or ok false.
func (p *pinnedLists) list(h *faissfmt.HNSW, v int32, l int) ([]byte, bool) {
	n0 := p.len0[v]
	if n0 == notPinned {
		return nil, false
	}
	s := int64(p.start[v])
	if l == 0 {
		return p.ids[s*4 : (s+int64(n0))*4], true
	}
	b, e := h.NeighborSlots(v, l)
	b1, _ := h.NeighborSlots(v, 1)
	u := s + int64(n0) + (b - b1)
	return p.ids[u*4 : (u+e-b)*4], true
}

func (p *pinnedLists) free() {
	if p == nil {
		return
	}
	for i := range p.mem {
		p.mem[i].Free()
	}
}

// newPinnedLists allocates the node tables and room for slots entries (the
// mapping is virtual: only pages written count toward memory).
func newPinnedLists(n int, slots int64) (*pinnedLists, error) {
	if slots > math.MaxUint32 {
		return nil, fmt.Errorf("%d neighbor slots are too many to pin", slots)
	}
	p := &pinnedLists{}
	p.mem[0] = offheap.AllocDense(4 * n)
	p.mem[1] = offheap.AllocDense(2 * n)
	p.mem[2] = offheap.Alloc(int(4 * max(slots, 1)))
	p.start = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(p.mem[0].B))), n)
	p.len0 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(p.mem[1].B))), n)
	p.ids = p.mem[2].B
	for i := range p.len0 {
		p.len0[i] = notPinned
	}
	p.bytes = 6 * int64(n)
	return p, nil
}

// add stores node v's record (slot0 bytes of level 0, then upper levels)
// compacted at slot at, and returns the next free slot.
func (p *pinnedLists) add(v int32, rec []byte, slot0 int, at int64) int64 {
	n0 := validPrefix(rec[:min(slot0, len(rec))])
	p.start[v], p.len0[v] = uint32(at), uint16(n0)
	at += int64(copy(p.ids[at*4:], rec[:n0*4])) / 4
	if len(rec) > slot0 {
		at += int64(copy(p.ids[at*4:], rec[slot0:])) / 4
	}
	return at
}

// validPrefix counts a level-0 list's entries before its first −1.
func validPrefix(list []byte) int {
	for j := 0; j+4 <= len(list); j += 4 {
		if int32(binary.LittleEndian.Uint32(list[j:])) < 0 {
			return j / 4
		}
	}
	return len(list) / 4
}

// pinAll pins every node's lists, compacted, in one sequential pass.
func (x *Index) pinAll(ctx context.Context) error {
	if x.h.CumNeighbors[1] >= notPinned {
		return fmt.Errorf("level-0 lists of %d slots are too long to pin", x.h.CumNeighbors[1])
	}
	p, err := newPinnedLists(int(x.n), x.nb.Len/4)
	if err != nil {
		return err
	}
	return x.fill(ctx, p, nil)
}

// fill copies the records of the nodes pick marks (nil: all) into p, in
// one sequential pass, and pins p.
func (x *Index) fill(ctx context.Context, p *pinnedLists, pick []bool) error {
	slot0 := int(x.h.CumNeighbors[1]) * 4 // level-0 bytes of a record
	var at int64
	err := x.streamNeighbors(ctx, func(v int32, rec []byte) {
		if pick == nil || pick[v] {
			at = p.add(v, rec, slot0, at)
		}
	})
	if err != nil {
		p.free()
		return fmt.Errorf("pinning the neighbor lists: %w", err)
	}
	p.bytes += at * 4
	x.pinned = p
	return nil
}

// pinHubs pins, compacted, the lists of the nodes most likely to be
// expanded within budget bytes: nodes above level 0 (every query's descent
// crosses them), then by in-degree. Two sequential passes over the section:
// in-degrees and list lengths, then the copy.
func (x *Index) pinHubs(ctx context.Context, budget int64) error {
	n := int(x.n)
	if x.h.CumNeighbors[1] >= notPinned {
		return fmt.Errorf("level-0 lists of %d slots are too long to pin", x.h.CumNeighbors[1])
	}
	budget -= 6 * int64(n)
	if budget <= 0 {
		return nil
	}
	slot0 := int(x.h.CumNeighbors[1]) * 4
	indeg := make([]int32, n)
	size := make([]uint32, n) // compacted record slots
	if err := x.streamNeighbors(ctx, func(v int32, rec []byte) {
		for j := 0; j+4 <= len(rec); j += 4 {
			if w := int32(binary.LittleEndian.Uint32(rec[j:])); w >= 0 && w < x.n {
				indeg[w]++
			}
		}
		size[v] = uint32(validPrefix(rec[:min(slot0, len(rec))]) + max(0, len(rec)-slot0)/4)
	}); err != nil {
		return err
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		la, lb := x.h.NumLevels(a), x.h.NumLevels(b)
		if la != lb {
			return lb - la
		}
		return int(indeg[b] - indeg[a])
	})
	pick := make([]bool, n)
	var slots int64
	for _, v := range order {
		if (slots+int64(size[v]))*4 > budget {
			break
		}
		pick[v] = true
		slots += int64(size[v])
	}
	indeg, order = nil, nil
	p, err := newPinnedLists(n, slots)
	if err != nil {
		return err
	}
	return x.fill(ctx, p, pick)
}

// estimatePinnedAll estimates what pinAll would hold (estimatePinned).
func (x *Index) estimatePinnedAll(ctx context.Context) (int64, error) {
	return estimatePinned(ctx, x.st, x.h, int64(x.n))
}

// EstimatePinnedLists is what pinning every neighbor list of f would hold,
// the figure the bounded-memory policy plans with, from the sample of
// level-0 lists an opened Index reads, through s (f's file as the probe read
// it): for a caller choosing a plan before opening (PinsAllLists). The
// reads give up when ctx ends.
func EstimatePinnedLists(ctx context.Context, f *faissfmt.File, s partial.Storage) (int64, error) {
	g := f.Graph
	if g == nil || g.HNSW == nil {
		return 0, fmt.Errorf("%s index has no HNSW graph", f.Root.FourCC)
	}
	return estimatePinned(ctx, s, g.HNSW, g.NTotal)
}

// estimatePinned estimates what pinning every list of the n-node graph h
// holds: the node tables, the upper levels' slots (known from the
// offsets) and level 0's valid entries, averaged over up to 512 nodes
// spread over the file (one batch of reads through s, where it batches).
func estimatePinned(ctx context.Context, s partial.Storage, h *faissfmt.HNSW, n int64) (int64, error) {
	if len(h.CumNeighbors) < 2 {
		return 6 * n, nil
	}
	nb := h.Neighbors
	cum1 := int64(h.CumNeighbors[1])
	upper := nb.Len/4 - n*cum1
	samples := min(n, 512)
	buf := make([]byte, samples*cum1*4)
	reqs := make([]partial.ReadReq, samples)
	for i := range reqs {
		v := int32(int64(i) * n / samples)
		b, e := h.NeighborSlots(v, 0)
		reqs[i] = partial.ReadReq{Off: nb.Offset + 4*b, Buf: buf[int64(i)*cum1*4:][:4*(e-b)]}
	}
	var err error
	if br, ok := s.(partial.BatchReader); ok {
		err = br.ReadBatch(ctx, reqs)
	} else {
		for i := range reqs {
			if _, err = s.ReadAtContext(ctx, reqs[i].Buf, reqs[i].Off, nil); err != nil {
				break
			}
		}
	}
	if err != nil {
		return 0, fmt.Errorf("sampling the neighbor lists: %w", err)
	}
	var valid int64
	for _, q := range reqs {
		valid += int64(validPrefix(q.Buf))
	}
	return 6*n + 4*(upper+valid*n/max(samples, 1)), nil
}

// pinVectors copies the vectors into memory, one after another (a
// separate vector file's padding between them left out).
func (x *Index) pinVectors(ctx context.Context) error {
	if x.vstride == int64(x.codeSize) {
		b, err := x.pinSection(ctx, x.vst, x.codes)
		x.codesMem, x.codesView, x.codesStride = b, b.B, x.vstride
		return err
	}
	b, err := x.pinStrided(ctx)
	x.codesMem, x.codesView, x.codesStride = b, b.B, int64(x.codeSize)
	return err
}

// pinStrided copies the vectors of a separate vector file whose rows are
// padded (vstride > codeSize) outside the Go heap, compacted, reading
// about 4 MiB at a time.
func (x *Index) pinStrided(ctx context.Context) (offheap.Buf, error) {
	cs, stride, n := int64(x.codeSize), x.vstride, int64(x.n)
	b := offheap.AllocDense(int(n * cs))
	rows := max(1, (4<<20)/stride)
	buf := make([]byte, (rows-1)*stride+cs)
	for i := int64(0); i < n; i += rows {
		r := min(rows, n-i)
		chunk := buf[:(r-1)*stride+cs]
		if _, err := x.vst.ReadAtContext(ctx, chunk, x.codes.Offset+i*stride, nil); err != nil {
			b.Free()
			return offheap.Buf{}, fmt.Errorf("pinning the vectors: %w", err)
		}
		for j := int64(0); j < r; j++ {
			copy(b.B[(i+j)*cs:(i+j+1)*cs], chunk[j*stride:j*stride+cs])
		}
	}
	return b, nil
}

// pinIDMap copies the id map into memory.
func (x *Index) pinIDMap(ctx context.Context) error {
	b, err := x.pinSection(ctx, x.st, *x.idMap)
	x.idMem, x.idView = b, b.B
	return err
}

// pinSection copies a section of st outside the Go heap with 4 MiB reads.
func (x *Index) pinSection(ctx context.Context, st partial.Storage, sec faissfmt.Section) (offheap.Buf, error) {
	b := offheap.AllocDense(int(sec.Len))
	for off := int64(0); off < sec.Len; off += 4 << 20 {
		n := min(4<<20, sec.Len-off)
		if _, err := st.ReadAtContext(ctx, b.B[off:off+n], sec.Offset+off, nil); err != nil {
			b.Free()
			return offheap.Buf{}, fmt.Errorf("pinning the %s section: %w", sec.Name, err)
		}
	}
	return b, nil
}

// hold pins what o.hold names, outside the Go heap, after turning
// HeldBytes into that (the bounded-memory policy, Index.planHeld). On error
// the caller releases what was pinned.
func (x *Index) hold(ctx context.Context, o *Options) error {
	if o.HeldBytes > 0 {
		h, idMap, err := x.planHeld(ctx, o.HeldBytes, o.Guide != nil, o.NoVectorCache)
		if err != nil {
			return err
		}
		if idMap {
			if err := x.pinIDMap(ctx); err != nil {
				return err
			}
		}
		o.hold = h
	}
	h := &o.hold
	switch {
	case h.allLists:
		if err := x.pinAll(ctx); err != nil {
			return err
		}
	case h.hubBytes > 0:
		if err := x.pinHubs(ctx, h.hubBytes); err != nil {
			return err
		}
	}
	if h.vectors {
		if x.codesView == nil { // not viewed in place already
			if err := x.pinVectors(ctx); err != nil {
				return err
			}
		}
		h.cacheBytes, h.restBytes = 0, 0
	}
	if h.restBytes > 0 {
		h.cacheBytes = 0
		switch left := h.restBytes - x.pinned.size(); {
		case h.spare:
			x.spare = max(left, 0)
		case left >= minVectorCache(int64(x.n), int64(x.codeSize)):
			h.cacheBytes = left
		}
	}
	if h.cacheBytes > 0 {
		return x.newVectorCache(h.cacheBytes)
	}
	return nil
}

func (x *Index) newVectorCache(bytes int64) error {
	vc, err := recordcache.New(int(x.n), x.codeSize, bytes)
	if err != nil {
		return fmt.Errorf("vector cache: %w", err)
	}
	x.vc = vc
	return nil
}

// release frees everything hold pinned. No search may run.
func (x *Index) release() {
	if x.viewer == nil {
		x.nbView, x.idView = nil, nil
	}
	if x.vviewer == nil {
		x.codesView = nil
	}
	x.pinned.free()
	x.pinned = nil
	x.codesMem.Free()
	x.idMem.Free()
	if x.vc != nil {
		x.vc.Close()
		x.vc = nil
	}
}

func (p *pinnedLists) size() int64 {
	if p == nil {
		return 0
	}
	return p.bytes
}
