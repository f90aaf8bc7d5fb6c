package hnswsearch

import (
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// List read-ahead. Where level-0 lists are read from storage one hop at a
// time (not all pinned, no view, no block cache), each hop waits a whole
// device read, and the reads of one query never overlap. So when the list
// of the node being expanded must be read, the lists of the pool's next
// best candidates (those not held in memory) are read in the same batch:
// the search expands them next unless a neighbor beats them, and then
// finds their lists read. The order of expansions, and so the results, are
// the search's own; only when the bytes arrive changes. A list read ahead
// for a node the search never expands is a wasted read, counted in
// Stats.ListsAhead against Stats.ListsAheadUsed.

// listAheadWidth is the number of lists one batch reads: the expanded
// node's and up to listAheadWidth−1 of the pool's next best candidates.
const listAheadWidth = 4

// listStash holds the lists a query read ahead, until it expands their
// nodes: 2·listAheadWidth slots; when a batch needs more than are free,
// the lists stashed longest are dropped.
type listStash struct {
	ids  [2 * listAheadWidth]int32  // slot's node, −1 when free
	seq  [2 * listAheadWidth]uint32 // when the slot was filled
	bufs [2 * listAheadWidth][]byte
	tick uint32
}

// clear frees every slot: a new query, or a new stash (a zero stash holds
// node 0 in every slot).
func (t *listStash) clear() {
	for i := range t.ids {
		t.ids[i] = -1
	}
}

// take returns v's list and frees its slot, if v's list is stashed.
func (t *listStash) take(v int32) ([]byte, bool) {
	for i, id := range t.ids {
		if id == v {
			t.ids[i] = -1
			return t.bufs[i], true
		}
	}
	return nil, false
}

// holds reports whether v's list is stashed.
func (t *listStash) holds(v int32) bool {
	for _, id := range t.ids {
		if id == v {
			return true
		}
	}
	return false
}

// free makes k slots free (k ≤ the stash's size), dropping the lists
// stashed longest: a batch's lists then each get a slot of their own.
func (t *listStash) free(k int) {
	n := 0
	for _, id := range t.ids {
		if id < 0 {
			n++
		}
	}
	for ; n < k; n++ {
		old := -1
		for i, id := range t.ids {
			if id >= 0 && (old < 0 || t.tick-t.seq[i] > t.tick-t.seq[old]) {
				old = i
			}
		}
		t.ids[old] = -1
	}
}

// slot returns a free slot's buffer, of n bytes, for v's list (free made
// room for it).
func (t *listStash) slot(v int32, n int) []byte {
	i := 0
	for t.ids[i] >= 0 {
		i++
	}
	if cap(t.bufs[i]) < n {
		t.bufs[i] = make([]byte, n)
	}
	t.tick++
	t.ids[i], t.seq[i] = v, t.tick
	return t.bufs[i][:n]
}

// chooseListBatch returns the batch reader level-0 list read-ahead uses,
// or nil where it does not apply: lists viewed in place or all pinned, a
// storage other than a local file read with O_DIRECT (a block cache in
// front of it serves lists without a read; on an object store each list
// read ahead is a billed request), or batched reads off.
func (x *Index) chooseListBatch() partial.BatchReader {
	b, ok := x.st.(localDevice)
	if !ok || !x.opts.BatchReads || x.nbView != nil || x.blocks != nil || x.opts.hold.allLists {
		return nil
	}
	return b
}

// localDevice is a local file read with O_DIRECT (partial.Direct): reads in
// batches, each request straight to the device.
type localDevice interface {
	partial.BatchReader
	Alignment() int64
}

// maxAheadPool is the largest candidate pool pickAhead scans. Its passes
// over the pool cost several times popMin's own scan (BenchmarkPickAhead,
// the stop rule's pass included), a few percent of the device read it
// overlaps at this bound; above it lists are read one at a time.
const maxAheadPool = 4096

// levelZeroList returns v0's level-0 list when x.listBatch is set: from
// the stash when an earlier batch read it ahead, from memory when held,
// else in one batch with the lists of the pool's next best candidates (up
// to maxAheadPool entries). A read ahead that fails is dropped (the node's
// list is read again if it is expanded); only v0's own read failing fails
// the query. Reads counts every read; BytesRead the bytes of the lists
// the search used, as for vectors read ahead.
func (x *Index) levelZeroList(s *scratch, c *pool, v0 int32, efStop int) ([]byte, error) {
	if list, ok := s.lstash.take(v0); ok {
		s.st.ListsAheadUsed++
		s.st.BytesRead += int64(len(list))
		return list, nil
	}
	if _, ok := x.lists.held(v0, 0); ok || c.k > maxAheadPool {
		return x.lists.get(s, v0, 0)
	}
	ids := x.pickAhead(s, c, append(s.lpick[:0], v0), efStop)
	s.lpick = ids
	s.lreqs = s.lreqs[:0]
	s.lstash.free(len(ids) - 1)
	for i, v := range ids {
		b, e := x.h.NeighborSlots(v, 0)
		n := (e - b) * 4
		buf := s.nbuf[:n]
		if i > 0 {
			buf = s.lstash.slot(v, int(n))
		}
		s.lreqs = append(s.lreqs, partial.ReadReq{Off: x.nb.Offset + b*4, Buf: buf})
	}
	_ = x.listBatch.ReadBatch(s.ctx, s.lreqs) // each request carries its own error
	for i := range s.lreqs {
		q := &s.lreqs[i]
		s.st.IO.Add(&q.IO)
		if i > 0 && q.Err != nil {
			s.lstash.take(ids[i]) // dropped: read again if its node is expanded
		}
	}
	s.st.Reads += int64(len(s.lreqs))
	s.st.BytesRead += int64(len(s.lreqs[0].Buf))
	s.st.ListsAhead += int64(len(s.lreqs) - 1)
	s.st.Batches++
	if q := s.lreqs[0]; q.Err != nil {
		return nil, fmt.Errorf("reading the neighbors of node %d on level 0: %w", v0, q.Err)
	}
	return s.lreqs[0].Buf, nil
}

// pickAhead appends to ids up to listAheadWidth−1 of the pool's unexpanded
// candidates, nearest first (ties: the lower id), whose lists are neither
// held in memory nor stashed: one pass over the pool, keeping the best few
// in order. A candidate the stop rule already rules out is not taken:
// when efStop slots of the pool, popped or not, lie below its distance,
// they stay there while it waits (an eviction takes the pool's farthest
// slot, which it would be first), so countBelow is still at least efStop
// when it is popped and the loop stops (hnsw-search.md §5.3) before it is
// expanded (NaN distances aside, where this costs only a read). That needs a pool larger than efStop (k > efSearch: on_disk's
// shortlist), and it is then one more pass over the pool (up to three
// near the end of a search).
func (x *Index) pickAhead(s *scratch, c *pool, ids []int32, efStop int) []int32 {
	var top [listAheadWidth - 1]pair
	n := 0
	for i, v := range c.ids[:c.k] {
		if v < 0 {
			continue
		}
		d := c.dis[i]
		if n == len(top) && !before(d, v, top[n-1]) {
			continue
		}
		if _, held := x.lists.held(v, 0); held || s.lstash.holds(v) {
			continue
		}
		j := min(n, len(top)-1) // insert in order, dropping the last when full
		for j > 0 && before(d, v, top[j-1]) {
			top[j] = top[j-1]
			j--
		}
		top[j] = pair{d, v}
		n = min(n+1, len(top))
	}
	for c.k > efStop && n > 0 && c.countBelow(top[n-1].d) >= efStop {
		n-- // the farthest pick first: mostly one pass, which passes
	}
	for _, t := range top[:n] {
		ids = append(ids, t.id)
	}
	return ids
}

// before orders candidates as pickAhead takes them: nearer, then lower id.
func before(d float32, v int32, t pair) bool { return d < t.d || d == t.d && v < t.id }
