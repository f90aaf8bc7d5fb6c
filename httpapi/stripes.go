package httpapi

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// Per-request bookkeeping (a handle's users, an index's query counts and
// latencies, the request metrics) is kept in stripes, each on its own cache
// lines: a request picks one at random (math/rand/v2's generator is per
// thread) and writes only there, so requests on different cores rarely
// write the same line. Readers (GET /indexes, /metrics, closing a handle)
// sum the stripes. One shared counter per item cost a cache-line transfer
// between the cores on every request.
const nStripes = 8

func pickStripe() uint32 { return rand.Uint32() & (nStripes - 1) }

// users counts a handle's users by stripe. The registry's own hold is not a
// count but retired being false; a handle closes once it is retired and its
// users have left.
type users struct {
	n [nStripes]struct {
		v atomic.Int64
		_ [56]byte
	}
	retired atomic.Bool
}

// enter registers a user unless the handle is retired, returning its stripe.
// Its increment comes before its check of retired, and retire's store before
// its sum: either the sum sees the user, or the user sees the handle retired
// and backs out. Backing out is a leave: when it reports the handle unused
// (last is true), the caller closes it, since a concurrent leave may have
// counted this transient user and left the closing to it.
func (u *users) enter() (stripe uint32, ok, last bool) {
	i := pickStripe()
	u.n[i].v.Add(1)
	if u.retired.Load() {
		return 0, false, u.leave(i)
	}
	return i, true, false
}

// leave unregisters a user of stripe i; it reports whether the handle is
// retired and now unused (the caller closes it).
func (u *users) leave(i uint32) bool {
	u.n[i].v.Add(-1)
	return u.retired.Load() && u.count() == 0
}

// retire drops the registry's hold; it reports whether no user is left.
func (u *users) retire() bool {
	u.retired.Store(true)
	return u.count() == 0
}

// count is the number of users (those backing out of enter included).
func (u *users) count() int64 {
	var s int64
	for i := range u.n {
		s += u.n[i].v.Load()
	}
	return s
}

// lease is one user's hold on a handle.
type lease struct {
	h      *handle
	stripe uint32
}

func (l lease) release() {
	if l.h.users.leave(l.stripe) {
		l.h.close()
	}
}

// queryStats are an index's query counters and recent latencies, striped.
// A stripe's latencies are microseconds (what GET reports) in chunks
// allocated as its queries arrive, so a served index that is rarely
// searched holds a few hundred bytes of them, a busy one at most 16 KiB.
type queryStats struct {
	s [nStripes]struct {
		queries, errors atomic.Int64
		n               atomic.Int64
		ring            [latRing / latChunk]atomic.Pointer[[latChunk]atomic.Uint32]
		_               [40]byte
	}
}

// latRing latencies per stripe: the last 4096 queries' in all; latChunk
// of them are allocated at a time.
const (
	latRing  = 512
	latChunk = 64
)

func (q *queryStats) ok(stripe uint32, took time.Duration, queries int64) {
	s := &q.s[stripe]
	s.queries.Add(queries)
	i := (s.n.Add(1) - 1) % latRing
	p := &s.ring[i/latChunk]
	c := p.Load()
	if c == nil {
		p.CompareAndSwap(nil, new([latChunk]atomic.Uint32))
		c = p.Load()
	}
	c[i%latChunk].Store(uint32(min(took.Microseconds(), math.MaxUint32)))
}

func (q *queryStats) failed(stripe uint32) { q.s[stripe].errors.Add(1) }

func (q *queryStats) queries() (n int64) {
	for i := range q.s {
		n += q.s[i].queries.Load()
	}
	return n
}

func (q *queryStats) errors() (n int64) {
	for i := range q.s {
		n += q.s[i].errors.Load()
	}
	return n
}

// percentiles of the recorded latencies, in milliseconds. A slot being
// overwritten meanwhile gives a newer latency instead; one whose chunk a
// query has not yet allocated is left out.
func (q *queryStats) percentiles(ps ...float64) []float64 {
	var all []uint32
	for i := range q.s {
		s := &q.s[i]
		for j := range int(min(s.n.Load(), latRing)) {
			if c := s.ring[j/latChunk].Load(); c != nil {
				all = append(all, c[j%latChunk].Load())
			}
		}
	}
	out := make([]float64, len(ps))
	if len(all) == 0 {
		return out
	}
	slices.Sort(all)
	for i, p := range ps {
		out[i] = float64(all[min(len(all)-1, int(p*float64(len(all))))]) / 1000
	}
	return out
}

// counter is a striped monotonic count.
type counter struct {
	s [nStripes]struct {
		v atomic.Uint64
		_ [56]byte
	}
}

func (c *counter) add(stripe uint32, n uint64) { c.s[stripe].v.Add(n) }

func (c *counter) value() (n uint64) {
	for i := range c.s {
		n += c.s[i].v.Load()
	}
	return n
}

// histogram is a striped Prometheus-style histogram: per stripe a count per
// bucket (the last one +Inf) and the sum of observations in nanoseconds.
type histogram struct {
	bounds []float64 // upper bounds, seconds
	s      [nStripes]struct {
		counts []atomic.Uint64
		sumNs  atomic.Int64
		_      [48]byte
	}
}

func newHistogram(bounds []float64) *histogram {
	h := &histogram{bounds: bounds}
	for i := range h.s {
		h.s[i].counts = make([]atomic.Uint64, len(bounds)+1)
	}
	return h
}

func (h *histogram) observe(stripe uint32, d time.Duration) {
	sec := d.Seconds()
	b := sort.SearchFloat64s(h.bounds, sec) // first bound ≥ sec: Prometheus's le
	s := &h.s[stripe]
	s.counts[b].Add(1)
	s.sumNs.Add(int64(d))
}

// snapshot returns the total count, the sum in seconds and the cumulative
// count at each bound, as prometheus.MustNewConstHistogram takes them.
func (h *histogram) snapshot() (count uint64, sum float64, cum map[float64]uint64) {
	per := make([]uint64, len(h.bounds)+1)
	var ns int64
	for i := range h.s {
		s := &h.s[i]
		for b := range per {
			per[b] += s.counts[b].Load()
		}
		ns += s.sumNs.Load()
	}
	cum = make(map[float64]uint64, len(h.bounds))
	for b, bound := range h.bounds {
		count += per[b]
		cum[bound] = count
	}
	count += per[len(h.bounds)]
	return count, float64(ns) / 1e9, cum
}
