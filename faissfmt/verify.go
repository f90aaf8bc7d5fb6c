package faissfmt

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// Violation is one problem Verify found in a big section.
type Violation struct {
	Kind string `json:"kind"` // "neighbor_range", "padding", "neighbor_level", "duplicate_id", "non_finite", "footer_crc"
	Off  int64  `json:"offset"`
	Msg  string `json:"message"`
}

// LevelStats describes the neighbor lists of one HNSW level.
type LevelStats struct {
	Level     int     `json:"level"`
	Nodes     int64   `json:"nodes"`
	Capacity  int     `json:"capacity"`
	MinDegree int     `json:"min_degree"`
	MaxDegree int     `json:"max_degree"`
	MeanDeg   float64 `json:"mean_degree"`
	Empty     int64   `json:"empty_lists"`
	SelfLinks int64   `json:"self_links"`
	edges     int64
}

// Report is the outcome of Verify.
type Report struct {
	Violations     []Violation  `json:"violations"`       // the first MaxViolations
	NViolations    int64        `json:"violations_total"` // all of them
	Levels         []LevelStats `json:"levels,omitempty"`
	Unreachable    int64        `json:"unreachable"` // nodes not reachable from the entry point
	UnreachableIDs []int64      `json:"unreachable_sample,omitempty"`
	FooterCRC      *uint32      `json:"footer_crc_computed,omitempty"`
	FooterCRCOK    *bool        `json:"footer_crc_ok,omitempty"`
}

// OK reports whether no violation was found.
func (r *Report) OK() bool { return r.NViolations == 0 }

// VerifyOptions tunes Verify.
type VerifyOptions struct {
	MaxViolations int                     // kept in Report.Violations; default 1000
	Progress      func(done, total int64) // called as bytes are streamed; may be nil
	Reachability  bool                    // also walk the graph from the entry point
}

// Verify streams the big sections of f and checks what Open cannot without
// reading them: every neighbor id in [-1, ntotal), -1 only as trailing
// padding, neighbors listed on level l living on level l, unique ids in
// IxM2/IBM2 id maps, finite flat vectors, and the Lucene footer CRC. It
// returns an error only when reading fails; problems go into the Report.
func Verify(r io.ReaderAt, f *File, o VerifyOptions) (*Report, error) {
	if o.MaxViolations <= 0 {
		o.MaxViolations = 1000
	}
	v := &verifier{r: r, f: f, o: o, rep: &Report{}}
	for x := f.Root; x != nil; x = x.Child {
		v.total += streamedBytes(x)
	}
	if f.Footer != nil {
		v.total += f.Size
	}
	for x := f.Root; x != nil; x = x.Child {
		var err error
		switch {
		case x.HNSW != nil:
			err = v.graph(x)
			if err == nil && o.Reachability && v.rep.NViolations == 0 {
				err = v.reachability(x)
			}
		case x.FourCC == "IxM2" || x.FourCC == "IBM2":
			err = v.uniqueIDs(x)
		case x.FourCC == "IxF2" || x.FourCC == "IxFI" || x.FourCC == "IxFl":
			err = v.finite(x)
		}
		if err != nil {
			return v.rep, err
		}
	}
	if f.Footer != nil {
		if err := v.footer(); err != nil {
			return v.rep, err
		}
	}
	return v.rep, nil
}

func streamedBytes(x *Index) int64 {
	switch {
	case x.HNSW != nil:
		return x.HNSW.Neighbors.Len
	case x.FourCC == "IxM2" || x.FourCC == "IBM2":
		s, _ := x.Section("id_map")
		return s.Len
	case x.FourCC == "IxF2" || x.FourCC == "IxFI" || x.FourCC == "IxFl":
		s, _ := x.Section("codes")
		return s.Len
	}
	return 0
}

type verifier struct {
	r     io.ReaderAt
	f     *File
	o     VerifyOptions
	rep   *Report
	done  int64
	total int64
	buf   []byte
}

func (v *verifier) add(kind string, off int64, format string, a ...any) {
	v.rep.NViolations++
	if len(v.rep.Violations) < v.o.MaxViolations {
		v.rep.Violations = append(v.rep.Violations, Violation{Kind: kind, Off: off, Msg: fmt.Sprintf(format, a...)})
	}
}

// each streams section s in chunks of whole elements.
func (v *verifier) each(s Section, fn func(first int64, b []byte)) error {
	if v.buf == nil {
		v.buf = make([]byte, 1<<20)
	}
	per := int64(len(v.buf) / s.Elem * s.Elem)
	for done := int64(0); done < s.Len; {
		n := min(per, s.Len-done)
		if err := readFull(v.r, v.buf[:n], s.Offset+done, s.Name); err != nil {
			return err
		}
		fn(done/int64(s.Elem), v.buf[:n])
		done += n
		v.progress(n)
	}
	return nil
}

// slotReader reads a section's 4-byte elements in order through a 1 MiB buffer.
type slotReader struct {
	v    *verifier
	s    Section
	pos  int64 // next element
	base int64 // element index of buf[0]
	buf  []byte
}

func (sr *slotReader) next() (int32, error) {
	rel := (sr.pos - sr.base) * 4
	if rel >= int64(len(sr.buf)) {
		if sr.v.buf == nil {
			sr.v.buf = make([]byte, 1<<20)
		}
		n := min(int64(len(sr.v.buf)), sr.s.Len-sr.pos*4)
		sr.buf = sr.v.buf[:n]
		if err := readFull(sr.v.r, sr.buf, sr.s.Offset+sr.pos*4, sr.s.Name); err != nil {
			return 0, err
		}
		sr.base, rel = sr.pos, 0
		sr.v.progress(n)
	}
	sr.pos++
	return int32(binary.LittleEndian.Uint32(sr.buf[rel:])), nil
}

// graph reads every neighbor list in file order: node by node, level by level.
func (v *verifier) graph(x *Index) error {
	h := x.HNSW
	n := x.NTotal
	stats := make([]LevelStats, len(h.LevelsHistogram))
	for l := range stats {
		stats[l] = LevelStats{Level: l, Capacity: int(h.CumNeighbors[l+1] - h.CumNeighbors[l]), MinDegree: math.MaxInt}
	}
	sr := &slotReader{v: v, s: h.Neighbors}
	for i := int64(0); i < n; i++ {
		for l := 0; l < h.NumLevels(int32(i)); l++ {
			b, e := h.NeighborSlots(int32(i), l)
			deg, pad := 0, false
			for slot := b; slot < e; slot++ {
				id, err := sr.next()
				if err != nil {
					return err
				}
				at := h.Neighbors.Offset + slot*4
				f := h.checkSlot(id, l, pad)
				switch {
				case id == -1:
					pad = true
				case f == faultRange || f == faultPadding:
					v.add(f.kind(), at, "%s", h.faultMsg(f, id, i, l, int(slot-b), at))
				default: // a link, even to a node not on this level
					deg++
					if int64(id) == i {
						stats[l].SelfLinks++
					}
					if f == faultLevel {
						v.add(f.kind(), at, "%s", h.faultMsg(f, id, i, l, int(slot-b), at))
					}
				}
			}
			st := &stats[l]
			st.Nodes++
			st.edges += int64(deg)
			st.MinDegree, st.MaxDegree = min(st.MinDegree, deg), max(st.MaxDegree, deg)
			if deg == 0 {
				st.Empty++
			}
		}
	}
	for l := range stats {
		if stats[l].Nodes > 0 {
			stats[l].MeanDeg = float64(stats[l].edges) / float64(stats[l].Nodes)
		} else {
			stats[l].MinDegree = 0
		}
	}
	v.rep.Levels = stats
	return nil
}

func (v *verifier) progress(n int64) {
	v.done += n
	if v.o.Progress != nil {
		v.o.Progress(v.done, v.total)
	}
}

// reachability counts nodes not reachable from the entry point following
// links on every level, reading each node's lists once.
func (v *verifier) reachability(x *Index) error {
	h := x.HNSW
	n := x.NTotal
	if n == 0 {
		return nil
	}
	seen := make([]uint64, (n+63)/64)
	queue := []int32{h.EntryPoint}
	seen[h.EntryPoint>>6] |= 1 << uint(h.EntryPoint&63)
	var buf []byte
	for len(queue) > 0 {
		u := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		b, e := h.NodeOffset(int64(u)), h.NodeOffset(int64(u)+1)
		need := int((e - b) * 4)
		if cap(buf) < need {
			buf = make([]byte, need)
		}
		buf = buf[:need]
		if err := readFull(v.r, buf, h.Neighbors.Offset+b*4, "neighbors"); err != nil {
			return err
		}
		for j := 0; j+4 <= len(buf); j += 4 {
			w := int32(binary.LittleEndian.Uint32(buf[j:]))
			if w < 0 || int64(w) >= n {
				continue
			}
			if seen[w>>6]&(1<<uint(w&63)) == 0 {
				seen[w>>6] |= 1 << uint(w&63)
				queue = append(queue, w)
			}
		}
	}
	for i := int64(0); i < n; i++ {
		if seen[i>>6]&(1<<uint(i&63)) == 0 {
			v.rep.Unreachable++
			if len(v.rep.UnreachableIDs) < 20 {
				v.rep.UnreachableIDs = append(v.rep.UnreachableIDs, i)
			}
		}
	}
	return nil
}

func (v *verifier) uniqueIDs(x *Index) error {
	s, _ := x.Section("id_map")
	seen := make(map[int64]int64, s.Count())
	return v.each(s, func(first int64, b []byte) {
		for j := 0; j+8 <= len(b); j += 8 {
			i := first + int64(j/8)
			id := int64(binary.LittleEndian.Uint64(b[j:]))
			if prev, dup := seen[id]; dup {
				at := s.Offset + i*8
				v.add("duplicate_id", at, "%s id_map[%d]=%d repeats id_map[%d] (byte %d)", x.FourCC, i, id, prev, at)
				continue
			}
			seen[id] = i
		}
	})
}

func (v *verifier) finite(x *Index) error {
	s, _ := x.Section("codes")
	d := int64(x.D)
	return v.each(s, func(first int64, b []byte) {
		for j := 0; j+4 <= len(b); j += 4 {
			f := math.Float32frombits(binary.LittleEndian.Uint32(b[j:]))
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				i := first + int64(j/4)
				at := s.Offset + i*4
				v.add("non_finite", at, "vector %d component %d is %v (byte %d)", i/d, i%d, f, at)
			}
		}
	})
}

// footer checks the Lucene footer CRC-32 over bytes [0, size−8).
func (v *verifier) footer() error {
	crc, err := footerCRC(v.r, v.f.Size, func(n int64) {
		if v.o.Progress != nil {
			v.o.Progress(v.done+n, v.total)
		}
	})
	if err != nil {
		return err
	}
	v.progress(v.f.Size)
	mismatch := v.f.footerMismatch(crc)
	ok := mismatch == nil
	v.rep.FooterCRC, v.rep.FooterCRCOK = &crc, &ok
	if !ok {
		v.add("footer_crc", v.f.Footer.Off+8, "%s", mismatch.(*FormatError).Msg)
	}
	return nil
}

// VerifyFooterCRC computes the CRC-32 the Lucene footer covers and reports
// whether it matches. f must have a footer.
func VerifyFooterCRC(r io.ReaderAt, f *File) (computed uint32, ok bool, err error) {
	if f.Footer == nil {
		return 0, false, fmt.Errorf("file has no Lucene footer")
	}
	crc, err := footerCRC(r, f.Size, nil)
	return crc, err == nil && uint64(crc) == f.Footer.Checksum, err
}

func footerCRC(r io.ReaderAt, size int64, progress func(int64)) (uint32, error) {
	buf := make([]byte, 1<<20)
	var crc uint32
	end := size - 8
	for off := int64(0); off < end; {
		n := min(int64(len(buf)), end-off)
		if err := readFull(r, buf[:n], off, "file (footer checksum)"); err != nil {
			return 0, err
		}
		crc = crc32.Update(crc, crc32.IEEETable, buf[:n])
		off += n
		if progress != nil {
			progress(off)
		}
	}
	return crc, nil
}

// IDMapIdentity reports whether id_map[i] == i for every i (an id map that
// changes nothing), streaming the section.
func IDMapIdentity(r io.ReaderAt, s Section) (bool, error) {
	buf := make([]byte, min(s.Len, 1<<20))
	for done := int64(0); done < s.Len; {
		n := min(int64(len(buf)), s.Len-done)
		if err := readFull(r, buf[:n], s.Offset+done, s.Name); err != nil {
			return false, err
		}
		first := done / 8
		for j := int64(0); j+8 <= n; j += 8 {
			if int64(binary.LittleEndian.Uint64(buf[j:])) != first+j/8 {
				return false, nil
			}
		}
		done += n
	}
	return true, nil
}
