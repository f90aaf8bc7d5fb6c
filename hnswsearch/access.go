package hnswsearch

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
)

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

// neighbors returns node v's slot list on level l as raw little-endian int32s
// (zero-copy on viewer backends, copied into s.nbuf otherwise).
func (x *Index) neighbors(s *scratch, v int32, l int) ([]byte, error) {
	b, e := x.h.NeighborSlots(v, l)
	n := (e - b) * 4
	s.st.BytesRead += n
	if x.nbView != nil {
		return x.nbView[b*4 : e*4], nil
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
	s.st.NDis++
	exact := x.opts.Kernel == Exact
	switch x.kind {
	case flatL2:
		if exact {
			return distance.L2Exact(s.q, c), nil
		}
		return distance.L2Fast(s.q, c), nil
	case flatIP:
		if exact {
			return -distance.IPExact(s.q, c), nil
		}
		return -distance.IPFast(s.q, c), nil
	case sqL2:
		x.sq.Decode(s.dec, c)
		if exact {
			return distance.L2ExactF(s.q, s.dec), nil
		}
		return distance.L2FastF(s.q, s.dec), nil
	case sqIP:
		x.sq.Decode(s.dec, c)
		if exact {
			return -distance.IPExactF(s.q, s.dec), nil
		}
		return -distance.IPFastF(s.q, s.dec), nil
	case sqIntL2:
		return distance.L2Bytes(s.qb[:x.d], c), nil
	case sqIntIP:
		return -distance.IPBytes(s.qb[:x.d], c), nil
	default:
		return float32(distance.Hamming(s.qb[:x.codeSize], c)), nil
	}
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
