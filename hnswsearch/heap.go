package hnswsearch

import (
	"math"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
)

// Heaps of (distance, id) pairs in parallel arrays, reproducing FAISS's
// heap primitives at array level (docs/hnsw-search.md §3, §4): 1-based positions,
// max-heap under the lexicographic "above" order
//
//	a above b  ⇔  a.d > b.d, or a.d == b.d and a.id > b.id
//
// The candidate pool's layout decides pop_min's tie-breaking, and the beam
// variant feeds a result heap's array order into the next level, so these
// must match FAISS exactly, not just be correct heaps.

func above(d1 float32, i1 int32, d2 float32, i2 int32) bool {
	return d1 > d2 || (d1 == d2 && i1 > i2)
}

// siftUp places (d, id) as the s-th entry (1-based) of a heap of s−1.
func siftUp(dis []float32, ids []int32, s int, d float32, id int32) {
	p := s
	for p > 1 {
		q := p >> 1
		if !above(d, id, dis[q-1], ids[q-1]) {
			break
		}
		dis[p-1], ids[p-1] = dis[q-1], ids[q-1]
		p = q
	}
	dis[p-1], ids[p-1] = d, id
}

// findDown sifts a hole from the root down for (d, id) over positions
// 1…s and returns where (d, id) belongs.
func findDown(dis []float32, ids []int32, s int, d float32, id int32) int {
	p := 1
	for {
		c1 := p << 1
		if c1 > s {
			return p
		}
		c := c1
		if c1+1 != s+1 && !above(dis[c1-1], ids[c1-1], dis[c1], ids[c1]) {
			c = c1 + 1
		}
		if above(d, id, dis[c-1], ids[c-1]) {
			return p
		}
		dis[p-1], ids[p-1] = dis[c-1], ids[c-1]
		p = c
	}
}

// replaceTop replaces the root of a heap of s entries with (d, id).
func replaceTop(dis []float32, ids []int32, s int, d float32, id int32) {
	p := findDown(dis, ids, s, d, id)
	dis[p-1], ids[p-1] = d, id
}

// popTop removes the root of a heap of s entries (the last entry moves down
// from the root, with slot s still counted as present while it sifts).
func popTop(dis []float32, ids []int32, s int) {
	d, id := dis[s-1], ids[s-1]
	p := findDown(dis, ids, s, d, id)
	dis[p-1], ids[p-1] = d, id
}

// resultHeap is R: the k best (distance, id) pairs seen, a max-heap.
type resultHeap struct {
	dis []float32
	ids []int32
	k   int
	n   int
	// finiteOnly: FAISS ≥ 1.8 pre-fills R with (FLT_MAX, −1), so a distance
	// ≥ FLT_MAX never enters (docs/hnsw-search.md §9 row 4).
	finiteOnly bool
}

func (r *resultHeap) reset(k int, finiteOnly bool) {
	if cap(r.dis) < k {
		r.dis, r.ids = make([]float32, k), make([]int32, k)
	}
	r.dis, r.ids, r.k, r.n, r.finiteOnly = r.dis[:k], r.ids[:k], k, 0, finiteOnly
}

// offer is offer(d, id) of docs/hnsw-search.md §3.
func (r *resultHeap) offer(d float32, id int32) {
	if r.n < r.k {
		if r.finiteOnly && !(d < fltMax) {
			return
		}
		r.n++
		siftUp(r.dis, r.ids, r.n, d, id)
	} else if d < r.dis[0] {
		replaceTop(r.dis, r.ids, r.n, d, id)
	}
}

// pool is the candidate pool C ("MinimaxHeap", docs/hnsw-search.md §4).
type pool struct {
	dis    []float32
	ids    []int32
	n      int // capacity
	k      int // slots in use
	nvalid int
	// fixed: FAISS ≥ 1.7.4 decrements nvalid on eviction only when the
	// evicted top had not been popped; 1.7.3 always decrements.
	fixed bool
	// poppedEvictions counts evictions of an already-popped top: the only
	// event where the two behaviours differ.
	poppedEvictions int
	// popped counts popped slots still in the array (ids −1).
	popped int
}

func (c *pool) reset(n int, fixed bool) {
	if cap(c.dis) < n {
		c.dis, c.ids = make([]float32, n), make([]int32, n)
	}
	c.dis, c.ids, c.n, c.k, c.nvalid, c.fixed, c.poppedEvictions, c.popped = c.dis[:n], c.ids[:n], n, 0, 0, fixed, 0, 0
}

func (c *pool) size() int { return c.nvalid }

func (c *pool) push(id int32, d float32) {
	if c.k == c.n {
		if d >= c.dis[0] {
			return
		}
		if c.ids[0] == -1 {
			c.poppedEvictions++
			c.popped--
		}
		if !c.fixed || c.ids[0] != -1 {
			c.nvalid--
		}
		popTop(c.dis, c.ids, c.k)
		c.k--
	}
	c.k++
	siftUp(c.dis, c.ids, c.k, d, id)
	c.nvalid++
}

// popMin returns the smallest valid entry, the highest slot among equal
// minima, and marks it popped; id −1 when none is valid.
//
// FAISS scans down from the top: the first valid slot is the running best,
// replaced only by a strictly smaller distance. With no NaN in a valid
// slot that is "the highest slot holding the minimum", which
// distance.MinSlot2 finds (with SIMD on amd64). The literal scan runs when
// a valid slot holds a NaN.
//
// next is a hint: the id of a valid entry no larger than any other left
// (the runner-up), or −1 when there is none or the literal scan ran.
// Callers may prefetch its data.
func (c *pool) popMin() (id int32, d0 float32, next int32) {
	dis, ids := c.dis[:c.k], c.ids[:c.k]
	best, second, ok := distance.MinSlot2(dis, ids)
	if !ok {
		id, d0 = c.popMinLiteral()
		return id, d0, -1
	}
	if best < 0 {
		return -1, 0, -1
	}
	next = -1
	if second >= 0 {
		next = ids[second]
	}
	id = ids[best]
	ids[best] = -1
	c.nvalid--
	c.popped++
	return id, dis[best], next
}

// popMinLiteral is FAISS 1.7.3's MinimaxHeap::pop_min, step by step.
func (c *pool) popMinLiteral() (int32, float32) {
	i := c.k - 1
	for i >= 0 && c.ids[i] == -1 {
		i--
	}
	if i < 0 {
		return -1, 0
	}
	best, bd := i, c.dis[i]
	for i--; i >= 0; i-- {
		if c.ids[i] != -1 && c.dis[i] < bd {
			best, bd = i, c.dis[i]
		}
	}
	id := c.ids[best]
	c.ids[best] = -1
	c.nvalid--
	c.popped++
	return id, bd
}

// atLeastBelow reports countBelow(d0) ≥ bound for the d0 popMin just
// returned, scanning only when enough popped slots remain for it to hold.
func (c *pool) atLeastBelow(d0 float32, bound int) bool {
	return c.popped > bound && c.countBelow(d0) >= bound
}

// peekMin2 returns the ids of the two smallest valid entries without
// popping them (for read-ahead: ties are not broken as popMin does), −1
// where there are fewer.
func (c *pool) peekMin2() (int32, int32) {
	b1, b2 := int32(-1), int32(-1)
	d1, d2 := float32(math.Inf(1)), float32(math.Inf(1))
	for i, d := range c.dis[:c.k] {
		if d < d2 && c.ids[i] != -1 {
			if d < d1 {
				b2, d2 = b1, d1
				b1, d1 = c.ids[i], d
			} else {
				b2, d2 = c.ids[i], d
			}
		}
	}
	return b1, b2
}

// countBelow counts slots in use with distance < t, popped ones included.
// Right after popMin returned d0, no valid slot lies below d0 (it was their
// minimum, also under the literal scan), so countBelow(d0) ≤ popped − 1:
// callers comparing it with a bound skip the scan while popped ≤ bound
// (see atLeastBelow).
func (c *pool) countBelow(t float32) int {
	n := 0
	for _, d := range c.dis[:c.k] {
		if d < t {
			n++
		}
	}
	return n
}
