package hnswsearch

import (
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"slices"

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
	if x.pinned != nil {
		if list, ok := x.pinned.list(x, v, l); ok {
			s.st.BytesPinned += int64(len(list))
			return list, nil
		}
	}
	buf := s.nbuf[:n]
	if x.blocks != nil {
		if v, ok := x.blocks.ViewBlock(x.nb.Offset+b*4, n, &s.st.IO); ok {
			return v, nil
		}
		if x.blocks.CopyCached(buf, x.nb.Offset+b*4, &s.st.IO) {
			return buf, nil
		}
	}
	s.st.Reads++
	if _, err := x.readAt(s, buf, x.nb.Offset+b*4); err != nil {
		return nil, fmt.Errorf("hnswsearch: reading the neighbors of node %d on level %d: %w", v, l, err)
	}
	return buf, nil
}

// prefetchList starts loading node v's list on level l into the CPU caches
// when it is in memory (viewed, or in a cached block), without counting it.
func (x *Index) prefetchList(v int32, l int) {
	b, e := x.h.NeighborSlots(v, l)
	switch {
	case x.nbView != nil:
		distance.Prefetch(x.nbView[b*4 : e*4])
	case x.pinned != nil:
		if list, ok := x.pinned.list(x, v, l); ok {
			distance.Prefetch(list)
		}
	case x.blocks != nil:
		if list, ok := x.blocks.ViewBlock(x.nb.Offset+b*4, (e-b)*4, nil); ok {
			distance.Prefetch(list)
		}
	}
}

// prefetchCodes starts loading the vectors of the ids in list (neighbor
// list bytes) on zero-copy backends, so that the greedy descent's
// distances, computed one after the other, overlap their cache misses.
// It stops at the list's end (−1) or at an id out of range, which the
// caller's checks report.
func (x *Index) prefetchCodes(list []byte) {
	cs := int64(x.codeSize)
	for j := 0; j+4 <= len(list); j += 4 {
		v := int32(binary.LittleEndian.Uint32(list[j:]))
		if v < 0 || v >= x.n {
			return
		}
		switch {
		case x.codesView != nil:
			distance.Prefetch(x.codesView[int64(v)*cs : int64(v+1)*cs])
		case x.blocks != nil && x.batch == nil:
			if b, ok := x.blocks.ViewBlock(x.codes.Offset+int64(v)*cs, cs, nil); ok {
				distance.Prefetch(b)
			}
		default:
			return
		}
	}
}

// prefetchViewed starts loading the vectors of cand from the zero-copy
// view, all of them, so their cache misses overlap. Vectors of 1 KiB and
// more get two passes: first the line holding each one's first byte, then
// each whole vector, so every vector's memory access starts at once rather
// than one vector's lines after another's. BenchmarkHeadsFirst: on
// fashion-mnist (784-d, 49 lines a vector) search ran 2.5–7% faster in
// full mode and over mmap; on 128-d vectors (8 lines) 0.5–2.5% slower, so
// smaller vectors take the one pass.
func (x *Index) prefetchViewed(cand []int32) {
	cs := int64(x.codeSize)
	if cs >= headsFirstBytes {
		for _, v := range cand {
			distance.Prefetch(x.codesView[int64(v)*cs : int64(v)*cs+1])
		}
	}
	for _, v := range cand {
		distance.Prefetch(x.codesView[int64(v)*cs : int64(v+1)*cs])
	}
}

// headsFirstBytes is the vector size from which prefetchViewed makes two
// passes (a variable for BenchmarkHeadsFirst).
var headsFirstBytes int64 = 1024

// prefetchWindow is how many vectors ahead the greedy descent prefetches:
// about 16 KiB of them, a third of L1. Prefetching a whole upper-level list
// of 784-d vectors (16 × 3136 bytes) ran 10% slower than none.
func prefetchWindow(codeSize int) int {
	return max(1, 16384/max(codeSize, 1))
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
	if x.vc != nil {
		if x.vc.Copy(s.vbuf, v) {
			s.st.VectorCacheHits++
			s.st.BytesVectorCache += int64(x.codeSize)
			return s.vbuf, nil
		}
		s.st.Reads++
		if _, err := x.readAt(s, s.vbuf, x.codes.Offset+off); err != nil {
			return nil, fmt.Errorf("hnswsearch: reading vector %d: %w", v, err)
		}
		x.vc.Put(v, s.vbuf)
		return s.vbuf, nil
	}
	if x.blocks != nil {
		if buf, ok := x.blocks.ViewBlock(x.codes.Offset+off, int64(x.codeSize), &s.st.IO); ok {
			return buf, nil
		}
		// A vector across two cached blocks: copied, without the read path.
		if x.blocks.CopyCached(s.vbuf, x.codes.Offset+off, &s.st.IO) {
			return s.vbuf, nil
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

// readAhead adds to s.ahead the unvisited neighbors of node next (one of
// the pool's two best candidates, likely expanded soon) that the vector
// cache lacks, when next's list is in memory: fetchCodes reads them with the
// current batch into the cache, so that expansion waits on no device read.
// It only fills the cache: results and distance counts are unchanged.
// (Reading them asynchronously instead was measured slower: demand reads
// then duplicate reads in flight.)
func (x *Index) readAhead(s *scratch, next int32, level int) {
	if next < 0 {
		return
	}
	list, ok := x.memNeighbors(next, level)
	if !ok {
		return
	}
	for j := 0; j+4 <= len(list); j += 4 {
		v := int32(binary.LittleEndian.Uint32(list[j:]))
		if v < 0 || v >= x.n {
			break
		}
		if s.visited[v] != s.gen && !x.vc.Contains(v) && !slices.Contains(s.ahead, v) {
			s.ahead = append(s.ahead, v)
		}
	}
}

// memNeighbors returns node v's list on level l when it is held in memory
// (pinned or viewed), without counting it as read.
func (x *Index) memNeighbors(v int32, l int) ([]byte, bool) {
	b, e := x.h.NeighborSlots(v, l)
	if x.nbView != nil {
		return x.nbView[b*4 : e*4], true
	}
	if x.pinned != nil {
		return x.pinned.list(x, v, l)
	}
	return nil, false
}

// cachedCode is a vector served in place by the vector cache.
type cachedCode struct {
	rec   []byte // nil: the vector is in s.codes
	token uint64
}

// fetchCodes gets the vectors of s.cand: those in the vector cache in place
// (s.hits), the others read in one batch into s.codes (and then cached).
func (x *Index) fetchCodes(s *scratch) error {
	cs := x.codeSize
	need := len(s.cand) * cs
	if cap(s.codes) < need {
		s.codes = make([]byte, need)
	}
	s.codes = s.codes[:need]
	s.st.BytesRead += int64(need)
	s.reqs = s.reqs[:0]
	s.hits = s.hits[:0]
	for i, v := range s.cand {
		if x.vc != nil {
			if rec, tok, ok := x.vc.Get(v); ok {
				distance.Prefetch(rec)
				s.hits = append(s.hits, cachedCode{rec, tok})
				s.st.VectorCacheHits++
				s.st.BytesVectorCache += int64(cs)
				continue
			}
			s.hits = append(s.hits, cachedCode{})
		}
		s.reqs = append(s.reqs, partial.ReadReq{Off: x.codes.Offset + int64(v)*int64(cs), Buf: s.codes[i*cs : (i+1)*cs]})
	}
	if len(s.reqs) == 0 {
		return nil
	}
	nc := len(s.reqs)
	if len(s.ahead) > 0 {
		if cap(s.aheadB) < len(s.ahead)*cs {
			s.aheadB = make([]byte, len(s.ahead)*cs)
		}
		for j, v := range s.ahead {
			s.reqs = append(s.reqs, partial.ReadReq{Off: x.codes.Offset + int64(v)*int64(cs), Buf: s.aheadB[j*cs : (j+1)*cs]})
		}
		s.st.ReadAhead += int64(len(s.ahead))
	}
	s.st.Batches++
	err := x.batch.ReadBatch(s.reqs)
	if x.vc != nil && err == nil {
		for _, q := range s.reqs {
			x.vc.Put(int32((q.Off-x.codes.Offset)/int64(cs)), q.Buf)
		}
	}
	for i := range s.reqs {
		q := &s.reqs[i]
		s.st.IO.CacheHits += q.IO.CacheHits
		s.st.IO.CacheMisses += q.IO.CacheMisses
		s.st.IO.DeviceReads += q.IO.DeviceReads
		s.st.IO.DeviceBytes += q.IO.DeviceBytes
	}
	s.st.Reads += int64(len(s.reqs))
	s.reqs = s.reqs[:nc]
	if err != nil {
		return fmt.Errorf("hnswsearch: batch of %d vector reads: %w", len(s.reqs), err)
	}
	return nil
}

// candDist is the distance to s.cand[i] after fetchCodes: computed in place
// on a cached vector, which is read again if it was overwritten meanwhile.
func (x *Index) candDist(s *scratch, i int) (float32, error) {
	cs := x.codeSize
	if x.vc != nil {
		if h := s.hits[i]; h.rec != nil {
			d := x.distCode(s, h.rec)
			if x.vc.Valid(h.token) {
				return d, nil
			}
			s.st.NDis--
			s.st.Reads++
			if _, err := x.readAt(s, s.codes[i*cs:(i+1)*cs], x.codes.Offset+int64(s.cand[i])*int64(cs)); err != nil {
				return 0, fmt.Errorf("hnswsearch: reading vector %d: %w", s.cand[i], err)
			}
		}
	}
	return x.distCode(s, s.codes[i*cs:(i+1)*cs]), nil
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
func (x *Index) ExternalID(label int32) (id int64, err error) {
	if label < 0 || label >= x.n {
		return -1, fmt.Errorf("%w: label %d is out of range [0, %d)", ErrBadQuery, label, x.n)
	}
	if x.idMap == nil {
		return int64(label), nil
	}
	defer partial.RecoverFault(x.st, debug.SetPanicOnFault(true), &err) // the id map may be mapped
	s := x.scratch.Get().(*scratch)
	if id, err = x.externalID(s, label); err == nil {
		err = x.fileCheck()
	}
	x.scratch.Put(s)
	return id, err
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
