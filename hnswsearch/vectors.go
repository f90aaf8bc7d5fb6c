package hnswsearch

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/recordcache"
)

// vectorSource is where the search gets vectors and their distances to the
// query, chosen once by New (chooseVectors): bytes in memory (viewed in
// place or pinned), cached blocks viewed in place, the vector cache with
// batched reads, or plain reads. Each computes distances with the function
// bound at New (bindDist) and counts its work in s.st.
type vectorSource interface {
	// dist is the distance to vector v.
	dist(s *scratch, v int32) (float32, error)
	// dists writes the distances to the vectors of cand (the unvisited
	// neighbors of a node expanded on level) into out[:len(cand)], getting
	// the vectors together so that their loads overlap.
	dists(s *scratch, level int, cand []int32, out []float32) error
	// prefetch starts loading the vectors of the ids in list (neighbor list
	// bytes) into the CPU caches when they are in memory, so the greedy
	// descent's one-at-a-time distances overlap their misses. It stops at
	// the list's end (−1) or at an id out of range, which the caller's
	// checks report.
	prefetch(list []byte)
}

// distFn is the distance from s's query to a vector's stored bytes
// (FAISS's dist(i): squared L2, −inner product, or Hamming distance).
type distFn func(s *scratch, c []byte) float32

// bindDist chooses the distance function for the index's code kind and
// kernel: the fast kernels are chosen here, once (Options.NoAVX512), and
// each function calls its kernel directly.
func (x *Index) bindDist() distFn {
	exact := x.opts.Kernel == Exact
	sq, d, cs := &x.sq, x.d, x.codeSize
	fk := distance.Fast(!x.opts.NoAVX512)
	switch x.kind {
	case flatL2:
		if exact {
			return func(s *scratch, c []byte) float32 { return distance.L2Exact(s.q, c) }
		}
		l2 := fk.L2
		return func(s *scratch, c []byte) float32 { return l2(s.q, c) }
	case flatIP:
		if exact {
			return func(s *scratch, c []byte) float32 { return -distance.IPExact(s.q, c) }
		}
		ip := fk.IP
		return func(s *scratch, c []byte) float32 { return -ip(s.q, c) }
	case sqL2:
		if exact {
			return func(s *scratch, c []byte) float32 { sq.Decode(s.dec, c); return distance.L2ExactF(s.q, s.dec) }
		}
		l2 := fk.L2F
		return func(s *scratch, c []byte) float32 { sq.Decode(s.dec, c); return l2(s.q, s.dec) }
	case sqIP:
		if exact {
			return func(s *scratch, c []byte) float32 { sq.Decode(s.dec, c); return -distance.IPExactF(s.q, s.dec) }
		}
		ip := fk.IPF
		return func(s *scratch, c []byte) float32 { sq.Decode(s.dec, c); return -ip(s.q, s.dec) }
	case sqIntL2:
		return func(s *scratch, c []byte) float32 { return distance.L2Bytes(s.qb[:d], c) }
	case sqIntIP:
		return func(s *scratch, c []byte) float32 { return -distance.IPBytes(s.qb[:d], c) }
	default:
		return func(s *scratch, c []byte) float32 { return float32(distance.Hamming(s.qb[:cs], c)) }
	}
}

// chooseVectors picks the vector source for what New found and pinned.
// Vectors lie in x.vst (the index file's storage, or a separate vector
// file) at x.codes.Offset + v·x.vstride; in memory (viewed or pinned) at
// v·x.codesStride of x.codesView.
func (x *Index) chooseVectors() vectorSource {
	if x.opts.Guide != nil {
		return guideVectors{}
	}
	fn, cs, off, stride := x.bindDist(), int64(x.codeSize), x.codes.Offset, x.vstride
	heads := cs >= headsFirstBytes
	if x.opts.test.headsFirst != 0 {
		heads = x.opts.test.headsFirst > 0
	}
	if x.codesView != nil {
		return &memVectors{b: x.codesView, cs: cs, stride: x.codesStride, n: x.n, fn: fn, headsFirst: heads}
	}
	var one vectorSource = &readVectors{x: x, off: off, cs: cs, stride: stride, fn: fn}
	if x.blocks != nil && !x.external {
		// (A separate vector file is read through its storage, its block
		// cache included, but not viewed in its blocks: the query's read
		// section, Index.run, covers the index file's block cache only.)
		one = &blockVectors{blocks: x.blocks, off: off, cs: cs, n: x.n, fn: fn, miss: one, headsFirst: heads}
	}
	if x.batch == nil && x.vc == nil {
		return one
	}
	return &batchVectors{x: x, vc: x.vc, batch: x.batch, one: one, off: off, cs: cs, stride: stride, fn: fn}
}

// headsFirstBytes is the vector size from which dists prefetches in two
// passes (see memVectors.prefetchAll; a test hook in Options overrides it).
const headsFirstBytes = 1024

// memVectors computes distances on vectors in memory: the section viewed
// in place, or pinned. Vector v is b[v·stride:][:cs].
type memVectors struct {
	b          []byte
	cs, stride int64
	n          int32
	fn         distFn
	headsFirst bool
}

func (m *memVectors) dist(s *scratch, v int32) (float32, error) {
	s.st.BytesRead += m.cs
	s.st.NDis++
	return m.fn(s, m.b[int64(v)*m.stride:][:m.cs]), nil
}

func (m *memVectors) dists(s *scratch, _ int, cand []int32, out []float32) error {
	m.prefetchAll(cand)
	s.st.BytesRead += int64(len(cand)) * m.cs
	s.st.NDis += len(cand)
	for i, v := range cand {
		out[i] = m.fn(s, m.b[int64(v)*m.stride:][:m.cs])
	}
	return nil
}

// prefetchAll starts loading all the vectors of cand, so their cache misses
// overlap. Vectors of 1 KiB and more get two passes: first the line holding
// each one's first byte, then each whole vector, so every vector's memory
// access starts at once rather than one vector's lines after another's.
// Two passes pay off for long vectors (many lines each) and cost a little
// for short ones, which take the one pass (BenchmarkHeadsFirst).
func (m *memVectors) prefetchAll(cand []int32) {
	cs, stride := m.cs, m.stride
	if m.headsFirst {
		for _, v := range cand {
			distance.Prefetch(m.b[int64(v)*stride:][:1])
		}
	}
	for _, v := range cand {
		distance.Prefetch(m.b[int64(v)*stride:][:cs])
	}
}

func (m *memVectors) prefetch(list []byte) {
	for j := 0; j+4 <= len(list); j += 4 {
		v := int32(binary.LittleEndian.Uint32(list[j:]))
		if v < 0 || v >= m.n {
			return
		}
		distance.Prefetch(m.b[int64(v)*m.stride:][:m.cs])
	}
}

// prefetchWindow is how many vectors ahead the greedy descent prefetches:
// about 16 KiB of them, a third of L1: a whole upper-level list of long
// vectors would overflow L1 and cost more than prefetching none.
func prefetchWindow(codeSize int) int {
	return max(1, 16384/max(codeSize, 1))
}

// readVectors reads each vector through the backend into s.vbuf.
type readVectors struct {
	x          *Index
	off        int64
	cs, stride int64
	fn         distFn
}

func (r *readVectors) dist(s *scratch, v int32) (float32, error) {
	s.st.BytesRead += r.cs
	s.st.Reads++
	if _, err := r.x.vreadAt(s, s.vbuf, r.off+int64(v)*r.stride); err != nil {
		return 0, fmt.Errorf("reading vector %d: %w", v, err)
	}
	s.st.NDis++
	return r.fn(s, s.vbuf), nil
}

func (r *readVectors) dists(s *scratch, _ int, cand []int32, out []float32) error {
	return distsOneByOne(r, s, cand, out)
}

func (r *readVectors) prefetch([]byte) {}

// distsOneByOne is dists for sources without a batched path.
func distsOneByOne(src vectorSource, s *scratch, cand []int32, out []float32) error {
	for i, v := range cand {
		d, err := src.dist(s, v)
		if err != nil {
			return err
		}
		out[i] = d
	}
	return nil
}

// blockVectors serves vectors from the backend's cached blocks in place
// (views stay valid for the query's read section, see Index.run), and
// misses from miss.
type blockVectors struct {
	blocks     partial.BlockViewer
	off        int64
	cs         int64
	n          int32
	fn         distFn
	miss       vectorSource
	headsFirst bool
}

func (b *blockVectors) dist(s *scratch, v int32) (float32, error) {
	off := b.off + int64(v)*b.cs
	if c, ok := b.blocks.ViewBlock(off, b.cs, &s.st.IO); ok {
		s.st.BytesRead += b.cs
		s.st.NDis++
		return b.fn(s, c), nil
	}
	// A vector across two cached blocks: copied, without the read path.
	if b.blocks.CopyCached(s.vbuf, off, &s.st.IO) {
		s.st.BytesRead += b.cs
		s.st.NDis++
		return b.fn(s, s.vbuf), nil
	}
	return b.miss.dist(s, v)
}

// dists takes a view of each vector first (one lookup each), prefetching
// it (large vectors: heads first, as memVectors does), then computes the
// distances on the views and reads the others.
func (b *blockVectors) dists(s *scratch, _ int, cand []int32, out []float32) error {
	cs, bs, heads := b.cs, b.blocks.BlockSize(), b.headsFirst
	s.views = s.views[:0]
	for _, v := range cand {
		off := b.off + int64(v)*cs
		c, ok := b.blocks.ViewBlock(off, cs, &s.st.IO)
		s.views = append(s.views, c)
		if ok {
			if heads {
				c = c[:1]
			}
			distance.Prefetch(c)
			continue
		}
		// A vector across a block boundary without a mirror: in two parts
		// (dist copies it; its misses would otherwise stall the copy).
		first := min(cs, bs-off&(bs-1))
		if first == cs {
			continue
		}
		if c, ok := b.blocks.ViewBlock(off, first, nil); ok {
			distance.Prefetch(c)
		}
		if c, ok := b.blocks.ViewBlock(off+first, cs-first, nil); ok {
			distance.Prefetch(c)
		}
	}
	if heads {
		for _, c := range s.views {
			distance.Prefetch(c) // a no-op on nil
		}
	}
	for i, v := range cand {
		if c := s.views[i]; c != nil {
			s.st.BytesRead += cs
			s.st.NDis++
			out[i] = b.fn(s, c)
			continue
		}
		d, err := b.dist(s, v)
		if err != nil {
			return err
		}
		out[i] = d
	}
	return nil
}

func (b *blockVectors) prefetch(list []byte) {
	for j := 0; j+4 <= len(list); j += 4 {
		v := int32(binary.LittleEndian.Uint32(list[j:]))
		if v < 0 || v >= b.n {
			return
		}
		if c, ok := b.blocks.ViewBlock(b.off+int64(v)*b.cs, b.cs, nil); ok {
			distance.Prefetch(c)
		}
	}
}

// batchVectors serves vectors from the vector cache (vc, may be nil) and
// reads an expansion's misses as one parallel batch (batch, may be nil:
// then one at a time), together with the vectors of the likely next
// expansions (read-ahead). Single distances without a vector cache come
// from one.
type batchVectors struct {
	x          *Index
	vc         *recordcache.Cache
	batch      partial.BatchReader
	one        vectorSource
	off        int64
	cs, stride int64
	fn         distFn
}

func (b *batchVectors) dist(s *scratch, v int32) (float32, error) {
	if b.vc == nil {
		return b.one.dist(s, v)
	}
	s.st.BytesRead += b.cs
	if b.vc.Copy(s.vbuf, v) {
		s.st.VectorCacheHits++
		s.st.BytesVectorCache += b.cs
	} else {
		s.st.Reads++
		if _, err := b.x.vreadAt(s, s.vbuf, b.off+int64(v)*b.stride); err != nil {
			return 0, fmt.Errorf("reading vector %d: %w", v, err)
		}
		b.vc.Put(v, s.vbuf)
	}
	s.st.NDis++
	return b.fn(s, s.vbuf), nil
}

func (b *batchVectors) prefetch([]byte) {}

// cachedCode is a vector served in place by the vector cache.
type cachedCode struct {
	rec   []byte // nil: the vector is in s.codes
	token uint64
}

func (b *batchVectors) dists(s *scratch, level int, cand []int32, out []float32) error {
	if b.batch == nil {
		return distsOneByOne(b, s, cand, out)
	}
	if b.vc != nil {
		n1, n2 := s.pool.peekMin2()
		s.ahead = s.ahead[:0]
		b.readAhead(s, n1, level)
		b.readAhead(s, n2, level)
	}
	if err := b.fetch(s, cand); err != nil {
		return err
	}
	cs := b.cs
	for i, v := range cand {
		c := s.codes[int64(i)*cs : int64(i+1)*cs]
		if b.vc != nil {
			if h := s.hits[i]; h.rec != nil {
				// Computed in place on the cached vector, which is read
				// again if it was overwritten meanwhile.
				d := b.fn(s, h.rec)
				if b.vc.Valid(h.token) {
					s.st.NDis++
					out[i] = d
					continue
				}
				s.st.Reads++
				if _, err := b.x.vreadAt(s, c, b.off+int64(v)*b.stride); err != nil {
					return fmt.Errorf("reading vector %d: %w", v, err)
				}
			}
		}
		s.st.NDis++
		out[i] = b.fn(s, c)
	}
	return nil
}

// readAhead adds to s.ahead the unvisited neighbors of node next (one of
// the pool's two best candidates, likely expanded soon) that the vector
// cache lacks, when next's list is held in memory: fetch reads them with
// the current batch into the cache, so that expansion waits on no device
// read. It only fills the cache: results and distance counts are
// unchanged. (It does not read them asynchronously: demand reads would
// then duplicate reads already in flight.)
func (b *batchVectors) readAhead(s *scratch, next int32, level int) {
	if next < 0 {
		return
	}
	list, ok := b.x.lists.held(next, level)
	if !ok {
		return
	}
	n := b.x.n
	for j := 0; j+4 <= len(list); j += 4 {
		v := int32(binary.LittleEndian.Uint32(list[j:]))
		if v < 0 || v >= n {
			break
		}
		if s.visited[v] != s.gen && !b.vc.Contains(v) && !slices.Contains(s.ahead, v) {
			s.ahead = append(s.ahead, v)
		}
	}
}

// fetch gets the vectors of cand: those in the vector cache in place
// (s.hits), the others read in one batch into s.codes (and then cached).
func (b *batchVectors) fetch(s *scratch, cand []int32) error {
	cs := int(b.cs)
	need := len(cand) * cs
	if cap(s.codes) < need {
		s.codes = make([]byte, need)
	}
	s.codes = s.codes[:need]
	s.st.BytesRead += int64(need)
	s.reqs = s.reqs[:0]
	s.hits = s.hits[:0]
	for i, v := range cand {
		if b.vc != nil {
			if rec, tok, ok := b.vc.Get(v); ok {
				distance.Prefetch(rec)
				s.hits = append(s.hits, cachedCode{rec, tok})
				s.st.VectorCacheHits++
				s.st.BytesVectorCache += int64(cs)
				continue
			}
			s.hits = append(s.hits, cachedCode{})
		}
		s.reqs = append(s.reqs, partial.ReadReq{Off: b.off + int64(v)*b.stride, Buf: s.codes[i*cs : (i+1)*cs]})
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
			s.reqs = append(s.reqs, partial.ReadReq{Off: b.off + int64(v)*b.stride, Buf: s.aheadB[j*cs : (j+1)*cs]})
		}
		s.st.ReadAhead += int64(len(s.ahead))
	}
	s.st.Batches++
	err := b.batch.ReadBatch(s.ctx, s.reqs)
	if b.vc != nil && err == nil {
		for _, q := range s.reqs {
			b.vc.Put(int32((q.Off-b.off)/b.stride), q.Buf)
		}
	}
	for i := range s.reqs {
		s.st.IO.Add(&s.reqs[i].IO)
	}
	s.st.Reads += int64(len(s.reqs))
	s.reqs = s.reqs[:nc]
	if err != nil {
		return fmt.Errorf("batch of %d vector reads: %w", len(s.reqs), err)
	}
	return nil
}
