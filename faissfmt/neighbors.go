package faissfmt

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"sync"
)

// The neighbor-list rules, in one place for Open (the entry point's lists),
// CheckNeighbors (every list, at load) and Verify (every list, all
// violations): each slot of node i's list on level l holds an id in
// [0, ntotal) that lives on level l (levels[id] > l), or −1, and −1s only
// trail (padding).
type slotFault uint8

const (
	slotOK slotFault = iota
	faultRange
	faultPadding
	faultLevel
)

// kind is the fault's Violation.Kind.
func (f slotFault) kind() string {
	return [...]string{"", "neighbor_range", "padding", "neighbor_level"}[f]
}

// checkSlot applies the rules to id, found on level l after a −1 slot of
// the same list (pad) or not.
func (h *HNSW) checkSlot(id int32, l int, pad bool) slotFault {
	switch {
	case id == -1:
		return slotOK
	case id < -1 || int64(id) >= h.nodes.n:
		return faultRange
	case pad:
		return faultPadding
	case l > 0 && h.nodes.levels(int64(id)) <= l:
		return faultLevel
	}
	return slotOK
}

// faultMsg describes fault f of the id in slot k of node's list on level l,
// at byte at of the file.
func (h *HNSW) faultMsg(f slotFault, id int32, node int64, l, k int, at int64) string {
	switch f {
	case faultRange:
		return fmt.Sprintf("neighbor id %d at node %d level %d is out of range [0, %d) (slot %d, byte %d)", id, node, l, h.nodes.n, k, at)
	case faultPadding:
		return fmt.Sprintf("neighbor id %d at node %d level %d follows a -1 padding slot (slot %d, byte %d)", id, node, l, k, at)
	case faultLevel:
		return fmt.Sprintf("neighbor id %d at node %d level %d is not on level %d (its top level is %d) (slot %d, byte %d)",
			id, node, l, l, h.nodes.levels(int64(id))-1, k, at)
	}
	return ""
}

// checkList applies the rules to node's list on level l, whose slots b
// holds (little-endian int32, as stored; the first at byte off of the
// file), and returns the first violation as a *FormatError.
func (h *HNSW) checkList(b []byte, node int64, l int, off int64) error {
	pad, n := false, uint64(h.nodes.n)
	j, rest := 0, b
	if l == 0 {
		// checkSlot passes the in-range ids before the first -1 of a level-0
		// list without a look at the node table: skip them.
		for len(rest) >= 4 && uint64(binary.LittleEndian.Uint32(rest)) < n {
			j, rest = j+4, rest[4:]
		}
	}
	for ; len(rest) >= 4; j, rest = j+4, rest[4:] {
		id := int32(binary.LittleEndian.Uint32(rest))
		if id == -1 { // passes anywhere
			pad = true
			continue
		}
		if f := h.checkSlot(id, l, pad); f != slotOK {
			at := off + int64(j)
			return invalidf("neighbors", at, "%s", h.faultMsg(f, id, node, l, j/4, at))
		}
	}
	return nil
}

// checkEntryLists checks the entry point's lists on levels 0 … max_level,
// which every search reads, with one read of those slots.
func (h *HNSW) checkEntryLists(r io.ReaderAt) error {
	if h.EntryPoint < 0 || h.MaxLevel < 0 {
		return nil
	}
	ep := int64(h.EntryPoint)
	first := h.nodes.offset(ep) // levels 0 … max_level are consecutive
	b := make([]byte, 4*int64(h.CumNeighbors[h.MaxLevel+1]))
	off := h.Neighbors.Offset + 4*first
	if err := readFull(r, b, off, "hnsw entry point's neighbors"); err != nil {
		return err
	}
	for l := 0; l <= int(h.MaxLevel); l++ {
		lo, hi := 4*int64(h.CumNeighbors[l]), 4*int64(h.CumNeighbors[l+1])
		if err := h.checkList(b[lo:hi], ep, l, off+lo); err != nil {
			return err
		}
	}
	return nil
}

// checkChunk is CheckNeighbors' read size (tests lower it).
var checkChunk int64 = 1 << 20

// CheckNeighbors applies the neighbor-list rules to every list of the
// graph, as FAISS ≥ 1.14 does when it reads a file: ids in [0, ntotal), on
// the level they are listed at, −1 only as trailing padding. It streams the
// neighbors section from r in 1 MiB reads and returns the first violation
// as a *FormatError (ErrInvalid) naming node, level, slot and byte.
func (h *HNSW) CheckNeighbors(r io.ReaderAt) error {
	buf := make([]byte, min(h.Neighbors.Len, checkChunk))
	for i := int64(0); i < h.nodes.n; {
		lo := 4 * h.nodes.offset(i)
		// Whole node records within one buffer (at least one record).
		j := i + 1
		for j < h.nodes.n && 4*h.nodes.offset(j+1)-lo <= int64(len(buf)) {
			j++
		}
		n := 4*h.nodes.offset(j) - lo
		if n > int64(len(buf)) {
			buf = make([]byte, n)
		}
		if err := readFull(r, buf[:n], h.Neighbors.Offset+lo, "neighbors"); err != nil {
			return err
		}
		if err := h.checkRecords(buf[:n], i, j); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// CheckNeighborBytes is CheckNeighbors over the neighbors section already
// in memory (nb: its Neighbors.Len bytes), split across GOMAXPROCS
// goroutines for large graphs; the error is still the first violation in
// file order.
func (h *HNSW) CheckNeighborBytes(nb []byte) error {
	if int64(len(nb)) != h.Neighbors.Len {
		return fmt.Errorf("CheckNeighborBytes got %d bytes, the neighbors section has %d", len(nb), h.Neighbors.Len)
	}
	n := h.nodes.n
	parts := int64(min(runtime.GOMAXPROCS(0), 16))
	parts = max(1, min(parts, n/checkPartNodes))
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		first, last := n*p/parts, n*(p+1)/parts
		b := nb[4*h.nodes.offset(first) : 4*h.nodes.offset(last)]
		wg.Go(func() { errs[p] = h.checkRecords(b, first, last) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkPartNodes is the fewest nodes CheckNeighborBytes gives a goroutine
// (tests lower it).
var checkPartNodes int64 = 1 << 16

// checkRecords checks the lists of nodes [first, last), whose records b
// holds back to back from node first's.
func (h *HNSW) checkRecords(b []byte, first, last int64) error {
	if first >= last {
		return nil
	}
	base := h.nodes.offset(first)
	cum, upper := h.CumNeighbors, h.nodes.upper
	s0 := 4 * int(cum[1])
	o := 0 // byte offset of node i's record in b
	for i := first; i < last; i++ {
		at := h.Neighbors.Offset + 4*base + int64(o)
		// Level 0, every node: ids in range, padding trailing.
		if err := h.checkList(b[o:o+s0], i, 0, at); err != nil {
			return err
		}
		if upper[i>>6]>>uint(i&63)&1 == 0 { // on level 0 only (most nodes)
			o += s0
			continue
		}
		lv := h.nodes.levels(i)
		for l := 1; l < lv; l++ {
			lo, hi := 4*int(cum[l]), 4*int(cum[l+1])
			if err := h.checkList(b[o+lo:o+hi], i, l, at+int64(lo)); err != nil {
				return err
			}
		}
		o += 4 * int(cum[lv])
	}
	return nil
}

// CheckFooterCRC checks the Lucene footer's CRC-32 over the file's bytes
// read from r; a mismatch is a *FormatError (ErrInvalid) naming the stored
// and the computed value. Files without a footer have nothing to check.
func CheckFooterCRC(r io.ReaderAt, f *File) error {
	if f.Footer == nil {
		return nil
	}
	crc, err := footerCRC(r, f.Size, nil)
	if err != nil {
		return err
	}
	return f.footerMismatch(crc)
}

// CheckFooterCRCBytes is CheckFooterCRC over the file's bytes in memory
// (data: at least the first Size−8 bytes).
func CheckFooterCRCBytes(data []byte, f *File) error {
	if f.Footer == nil {
		return nil
	}
	if int64(len(data)) < f.Size-8 {
		return fmt.Errorf("CheckFooterCRCBytes got %d bytes of a %d-byte file", len(data), f.Size)
	}
	return f.footerMismatch(crc32.ChecksumIEEE(data[:f.Size-8]))
}

// footerMismatch compares the computed CRC with the footer's (one message
// for load checks and Verify).
func (f *File) footerMismatch(crc uint32) error {
	if uint64(crc) == f.Footer.Checksum {
		return nil
	}
	at := f.Footer.Off + 8
	return invalidf("lucene footer", at, "Lucene footer checksum mismatch: the footer at byte %d expects CRC-32 %#08x, the file's first %d bytes have %#08x",
		at, f.Footer.Checksum, f.Size-8, crc)
}
