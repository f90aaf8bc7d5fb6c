package hnswsearch

import (
	"encoding/binary"
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// neighbors returns node v's slot list on level l as raw little-endian int32s
// (zero-copy on viewer backends, copied into s.nbuf otherwise).
func (x *Index) neighbors(s *scratch, v int32, l int) ([]byte, error) {
	b, e := x.h.NeighborSlots(v, l)
	n := (e - b) * 4
	s.st.BytesRead += n
	if x.nbView != nil {
		return x.nbView[b*4 : e*4], nil
	}
	if x.pinPos != nil {
		if p := x.pinPos[v]; p >= 0 {
			start := int64(p) + b - x.h.NodeOffset(int64(v)) // slot within the pinned record
			return x.pinBuf[start*4 : (start+e-b)*4], nil
		}
	}
	if x.blocks != nil {
		if buf, ok := x.blocks.ViewBlock(x.nb.Offset+b*4, n, &s.st.IO); ok {
			return buf, nil
		}
	}
	buf := s.nbuf[:n]
	s.st.Reads++
	if _, err := x.readAt(s, buf, x.nb.Offset+b*4); err != nil {
		return nil, fmt.Errorf("hnswsearch: reading the neighbors of node %d on level %d: %w", v, l, err)
	}
	return buf, nil
}

// readAt reads through the backend, attributing its I/O to the query.
func (x *Index) readAt(s *scratch, p []byte, off int64) (int, error) {
	if x.tally != nil {
		return x.tally.ReadAtTally(p, off, &s.st.IO)
	}
	return x.st.ReadAt(p, off)
}

// code returns vector v's stored bytes.
func (x *Index) code(s *scratch, v int32) ([]byte, error) {
	off := int64(v) * int64(x.codeSize)
	s.st.BytesRead += int64(x.codeSize)
	if x.codesView != nil {
		return x.codesView[off : off+int64(x.codeSize)], nil
	}
	if x.blocks != nil {
		if buf, ok := x.blocks.ViewBlock(x.codes.Offset+off, int64(x.codeSize), &s.st.IO); ok {
			return buf, nil
		}
	}
	s.st.Reads++
	if _, err := x.readAt(s, s.vbuf, x.codes.Offset+off); err != nil {
		return nil, fmt.Errorf("hnswsearch: reading vector %d: %w", v, err)
	}
	return s.vbuf, nil
}

// dist is FAISS's dist(i): squared L2, −inner product (HNSW minimises), or
// Hamming distance, with the index's kernel.
func (x *Index) dist(s *scratch, v int32) (float32, error) {
	c, err := x.code(s, v)
	if err != nil {
		return 0, err
	}
	return x.distCode(s, c), nil
}

// fetchCodes reads the vectors of s.cand in one batch into s.codes.
func (x *Index) fetchCodes(s *scratch) error {
	cs := x.codeSize
	need := len(s.cand) * cs
	if cap(s.codes) < need {
		s.codes = make([]byte, need)
	}
	s.codes = s.codes[:need]
	s.reqs = s.reqs[:0]
	for i, v := range s.cand {
		s.reqs = append(s.reqs, partial.ReadReq{Off: x.codes.Offset + int64(v)*int64(cs), Buf: s.codes[i*cs : (i+1)*cs]})
	}
	err := x.batch.ReadBatch(s.reqs)
	for i := range s.reqs {
		q := &s.reqs[i]
		s.st.IO.CacheHits += q.IO.CacheHits
		s.st.IO.CacheMisses += q.IO.CacheMisses
		s.st.IO.DeviceReads += q.IO.DeviceReads
		s.st.IO.DeviceBytes += q.IO.DeviceBytes
	}
	s.st.Reads += int64(len(s.reqs))
	s.st.BytesRead += int64(need)
	if err != nil {
		return fmt.Errorf("hnswsearch: batch of %d vector reads: %w", len(s.reqs), err)
	}
	return nil
}

// distCode computes the distance to a vector's stored bytes.
func (x *Index) distCode(s *scratch, c []byte) float32 {
	s.st.NDis++
	exact := x.opts.Kernel == Exact
	switch x.kind {
	case flatL2:
		if exact {
			return distance.L2Exact(s.q, c)
		}
		return distance.L2Fast(s.q, c)
	case flatIP:
		if exact {
			return -distance.IPExact(s.q, c)
		}
		return -distance.IPFast(s.q, c)
	case sqL2:
		x.sq.Decode(s.dec, c)
		if exact {
			return distance.L2ExactF(s.q, s.dec)
		}
		return distance.L2FastF(s.q, s.dec)
	case sqIP:
		x.sq.Decode(s.dec, c)
		if exact {
			return -distance.IPExactF(s.q, s.dec)
		}
		return -distance.IPFastF(s.q, s.dec)
	case sqIntL2:
		return distance.L2Bytes(s.qb[:x.d], c)
	case sqIntIP:
		return -distance.IPBytes(s.qb[:x.d], c)
	default:
		return float32(distance.Hamming(s.qb[:x.codeSize], c))
	}
}

// ExternalID maps a label (internal id) to the external id through the id
// map, if any; safe for concurrent use.
func (x *Index) ExternalID(label int32) (int64, error) {
	if label < 0 || label >= x.n {
		return -1, fmt.Errorf("%w: label %d is out of range [0, %d)", ErrBadQuery, label, x.n)
	}
	if x.idMap == nil {
		return int64(label), nil
	}
	s := x.scratch.Get().(*scratch)
	defer x.scratch.Put(s)
	return x.externalID(s, label)
}

// externalID maps an internal id through the id map, if any.
func (x *Index) externalID(s *scratch, v int32) (int64, error) {
	if x.idMap == nil {
		return int64(v), nil
	}
	if x.idView != nil {
		return int64(binary.LittleEndian.Uint64(x.idView[8*int64(v):])), nil
	}
	s.st.Reads++
	s.st.BytesRead += 8
	if _, err := x.readAt(s, s.idbuf, x.idMap.Offset+8*int64(v)); err != nil {
		return 0, fmt.Errorf("hnswsearch: reading id_map[%d]: %w", v, err)
	}
	return int64(binary.LittleEndian.Uint64(s.idbuf[:])), nil
}
