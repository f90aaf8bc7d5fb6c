package hnswsearch

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// Params are one query's parameters.
type Params struct {
	K int
	// EfSearch > 0 is FAISS's SearchParametersHNSW.efSearch; 0 searches
	// with the efSearch stored in the file and no search parameters.
	EfSearch int
	// Filter, when not nil, allows only these external ids (FAISS's
	// IDSelector semantics: other nodes are traversed but never returned).
	Filter []int64
	// Deadline, when not zero, ends a search still running then with
	// ErrDeadline (checked every deadlineEvery expansions or distances).
	Deadline time.Time
	// Ctx, when not nil, is the query's context: storage reads that can
	// wait (an object store, a device, a cache's fill) give up when it
	// ends. It should carry Deadline: a read given up at its deadline ends
	// the search with ErrDeadline.
	Ctx context.Context
}

// deadlineEvery is how many level-0 expansions (or exact-scan distances)
// pass between two looks at the clock: a few microseconds of work.
const deadlineEvery = 64

// queryContext is the context a query's reads run under: Params.Ctx, or
// one that never ends.
func queryContext(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// deadlineErr is the error a query ends with: a read its context gave up
// at the deadline ends it as the deadline does (ErrDeadline).
func (s *scratch) deadlineErr(err error) error {
	if err == nil || s.ctx == nil || errors.Is(err, ErrDeadline) || !errors.Is(s.ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrDeadline, err)
}

// pastDeadline reports whether s's query outlived its deadline.
func (s *scratch) pastDeadline() bool {
	return s.deadline != 0 && time.Now().UnixNano() > s.deadline
}

// Result is one hit: the external id and FAISS's distance (squared L2, inner
// product for IP, Hamming distance for binary indexes). Missing hits have
// id −1 and FAISS's fill distance.
type Result struct {
	ID       int64
	Distance float32
	// Label is FAISS's internal id (the storage row), −1 for missing hits:
	// what a full-precision vector store for rerank is addressed by.
	Label int32
}

// Stats describes one query's work.
type Stats struct {
	NDis        int   `json:"ndis"`         // distances computed
	NDisLevel0  int   `json:"ndis_level0"`  // distances on level 0 (FAISS's hnsw_stats.n3)
	Expanded    int   `json:"expanded"`     // level-0 nodes whose neighbor lists were read
	ExactScan   bool  `json:"exact_scan"`   // answered by an exact scan of the allowed ids
	PoolEmptied bool  `json:"pool_emptied"` // the level-0 loop ended with an empty pool (FAISS's n2)
	Reads       int64 `json:"reads"`        // storage reads issued (0 on zero-copy backends)
	BytesRead   int64 `json:"bytes_read"`   // bytes requested from storage (or touched in views)
	// IO is the backend's own account of this query: cache hits and misses
	// and device reads (pread, direct, zstd backends).
	IO partial.Tally `json:"io"`
	// Where the other bytes came from: pinned neighbor lists, and vectors
	// served by the vector cache (see Options.HeldBytes).
	BytesPinned      int64 `json:"bytes_pinned"`
	BytesVectorCache int64 `json:"bytes_vector_cache"`
	VectorCacheHits  int64 `json:"vector_cache_hits"`
	// ReadAhead counts vectors read ahead for the neighbors of the pool's
	// two best candidates (into the vector cache, with the current batch).
	ReadAhead int64 `json:"read_ahead"`
	// ListsAhead counts level-0 lists read ahead for candidates not yet
	// expanded, in the batch of an expanded node's list (listahead.go);
	// ListsAheadUsed those the search then expanded. The rest were wasted.
	ListsAhead     int64 `json:"lists_ahead"`
	ListsAheadUsed int64 `json:"lists_ahead_used"`
	// GuideDistances counts distances estimated on a guide (Options.Guide).
	GuideDistances int `json:"guide_distances"`
	// Batches counts batched reads issued (each one round trip to storage).
	Batches int64 `json:"batches"`
	// PoolCapacity is the candidate pool's size; poppedEvictions counts
	// where FAISS 1.7.3 and ≥ 1.7.4 pools diverge (tests only).
	PoolCapacity    int `json:"pool_capacity"`
	poppedEvictions int
}

type pair struct {
	d  float32
	id int32
}

// scratch is one query's reusable state.
type scratch struct {
	q       []float32
	qb      []byte // binary query, or the 8bit_direct integer query
	dec     []float32
	vbuf    []byte
	nbuf    []byte
	visited []uint8
	gen     uint8
	pool    pool
	res     resultHeap
	beam    resultHeap
	allowed []uint64
	sel     []uint64 // allowed while a filter is active, else nil
	pairs   []pair
	idbuf   []byte
	cand    []int32           // unvisited neighbors of a node
	cdis    []float32         // their distances
	codes   []byte            // their vectors
	reqs    []partial.ReadReq // the batch
	hits    []cachedCode      // per s.cand: the vector cache's bytes, if cached
	views   [][]byte          // per s.cand: its vector viewed in the block cache, or nil
	ahead   []int32           // vectors to read ahead into the vector cache
	aheadB  []byte            // their bytes
	st      Stats
	gq      GuideQuery        // the guide's query state, with Options.Guide
	lstash  listStash         // lists read ahead (listahead.go)
	lpick   []int32           // the nodes of a batch of lists
	lreqs   []partial.ReadReq // its reads
	// deadline is Params.Deadline in Unix nanoseconds, 0 for none.
	deadline int64
	// ctx is the query's context while it runs (queryContext), one that
	// never ends otherwise.
	ctx context.Context
}

func (x *Index) newScratch() *scratch {
	m := int(x.h.CumNeighbors[len(x.h.CumNeighbors)-1]) // largest list capacity bound
	s := &scratch{
		q:       make([]float32, x.d),
		qb:      make([]byte, max(x.codeSize, x.d)),
		dec:     make([]float32, x.d),
		vbuf:    make([]byte, x.codeSize),
		nbuf:    make([]byte, 4*max(m, 1)),
		cand:    make([]int32, 0, m),
		cdis:    make([]float32, m),
		visited: make([]uint8, x.n),
		idbuf:   make([]byte, 8),
		ctx:     context.Background(),
	}
	if x.opts.Guide != nil {
		s.gq = x.opts.Guide.NewQuery(!x.opts.NoAVX512)
	}
	s.lstash.clear()
	return s
}

// visit marks v visited and reports whether it already was.
func (s *scratch) visit(v int32) bool {
	if s.visited[v] == s.gen {
		return true
	}
	s.visited[v] = s.gen
	return false
}

// advance starts a fresh visited set (FAISS's VisitedTable::advance).
func (s *scratch) advance() {
	s.gen++
	if s.gen == 0 {
		clear(s.visited)
		s.gen = 1
	}
}

// Search returns the k nearest neighbors of q (len Dim()) appended to dst,
// in FAISS's order. Binary indexes take SearchBinary.
func (x *Index) Search(q []float32, p Params, dst []Result) ([]Result, Stats, error) {
	s, err := x.floatQuery(q)
	if err != nil {
		return dst, Stats{}, err
	}
	return x.guarded(s, p, dst)
}

// floatQuery checks a float query and returns a scratch from the pool
// holding it (and the guide's and the integer query's forms of it).
func (x *Index) floatQuery(q []float32) (*scratch, error) {
	if x.binary {
		return nil, fmt.Errorf("%w: index is binary: use a binary (byte) query", ErrBadQuery)
	}
	if len(q) != x.d {
		return nil, fmt.Errorf("%w: query has %d components, index dimension is %d", ErrBadQuery, len(q), x.d)
	}
	for j, v := range q {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%w: query component %d is %v", ErrBadQuery, j, v)
		}
	}
	s := x.scratch.Get().(*scratch)
	copy(s.q, q)
	if s.gq != nil {
		if err := s.gq.Reset(q); err != nil {
			x.scratch.Put(s)
			return nil, fmt.Errorf("%w: %v", ErrBadQuery, err)
		}
	}
	if x.kind == sqIntL2 || x.kind == sqIntIP {
		distance.QueryBytes(s.qb[:x.d], q)
	}
	return s, nil
}

// SearchBinary is Search for binary indexes: q is a code of Dim() bytes.
func (x *Index) SearchBinary(q []byte, p Params, dst []Result) ([]Result, Stats, error) {
	s, err := x.binaryQuery(q)
	if err != nil {
		return dst, Stats{}, err
	}
	return x.guarded(s, p, dst)
}

// binaryQuery checks a binary query and returns a scratch holding it.
func (x *Index) binaryQuery(q []byte) (*scratch, error) {
	if !x.binary {
		return nil, fmt.Errorf("%w: index holds float vectors: use a float query", ErrBadQuery)
	}
	if len(q) != x.codeSize {
		return nil, fmt.Errorf("%w: binary query has %d bytes, index codes have %d (%d bits)", ErrBadQuery, len(q), x.codeSize, x.d)
	}
	s := x.scratch.Get().(*scratch)
	copy(s.qb, q)
	return s, nil
}

// Validate checks p's sizes against MaxK and MaxEfSearch. Callers that
// allocate per k or per ef (result buffers, shortlists) call it first, so
// the one rule also guards their allocations.
func (p Params) Validate() error {
	switch {
	case p.K < 1 || p.K > MaxK:
		return fmt.Errorf("%w: k=%d is out of range [1, %d]", ErrBadQuery, p.K, MaxK)
	case p.EfSearch < 0 || p.EfSearch > MaxEfSearch:
		return fmt.Errorf("%w: ef_search=%d is out of range [1, %d] (0: the stored value)", ErrBadQuery, p.EfSearch, MaxEfSearch)
	}
	return nil
}

func (x *Index) checkParams(p Params) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if x.closed.Load() {
		return fmt.Errorf("index is closed")
	}
	return nil
}

func (x *Index) run(s *scratch, p Params, dst []Result) ([]Result, Stats, error) {
	if err := x.checkParams(p); err != nil {
		return dst, Stats{}, err
	}
	s.st = Stats{}
	s.deadline = 0
	if !p.Deadline.IsZero() {
		s.deadline = p.Deadline.UnixNano()
	}
	s.ctx = queryContext(p.Ctx)
	modern := x.opts.Semantics == Modern
	s.res.reset(p.K, modern)
	s.sel = nil
	if x.listBatch != nil {
		s.lstash.clear()
	}
	if x.blocks != nil {
		// Views of cached blocks stay valid until the query ends.
		e := x.blocks.EnterRead()
		defer x.blocks.ExitRead(e)
	}
	var err error
	switch {
	case x.n == 0 || x.h.EntryPoint < 0:
	case p.Filter != nil:
		var allowed int
		if allowed, err = x.setFilter(s, p.Filter); err != nil {
			break
		}
		if modern && allowed <= max(p.K, x.exactFilterMax()) {
			err = x.exactScan(s)
			break
		}
		err = x.searchGraph(s, p)
	default:
		err = x.searchGraph(s, p)
	}
	if x.blocks != nil {
		x.blocks.Account(&s.st.IO) // the block cache's hits, once per query
	}
	if err != nil {
		return dst, s.st, err
	}
	return x.output(s, p.K, dst)
}

// searchGraph is the search of docs/hnsw-search.md §5 (modern changes: §9).
func (x *Index) searchGraph(s *scratch, p Params) error {
	h := x.h
	modern := x.opts.Semantics == Modern
	efObj := int(x.efSearch) // the index's efSearch (Options.IndexEfSearch or stored)
	efStop := efObj
	if p.EfSearch > 0 {
		efStop = p.EfSearch
	}
	if x.baseLevel > 0 { // CAGRA with base_level_only (cagra.go)
		return x.searchBaseLevel(s, p)
	}
	if !modern && h.UpperBeam != 1 {
		return x.beamSearch(s, p.K)
	}
	nearest := h.EntryPoint
	dn, err := x.vecs.dist(s, nearest)
	if err != nil {
		return err
	}
	for l := int(h.MaxLevel); l >= 1; l-- {
		if nearest, dn, err = x.greedy(s, nearest, dn, l); err != nil {
			return err
		}
	}
	capacity := max(efObj, p.K) // 1.7.3: the object's efSearch, even with parameters
	if modern {
		capacity = max(efStop, p.K)
	}
	s.pool.reset(capacity, modern)
	s.pool.push(nearest, dn)
	s.advance()
	_, err = x.searchLevel(s, 0, &s.res, efStop)
	return err
}

// greedy is the upper-level descent: repeat full passes over the current
// node's list, moving on strict improvement, until a pass changes nothing.
func (x *Index) greedy(s *scratch, nearest int32, dn float32, level int) (int32, float32, error) {
	for {
		prev := nearest
		list, err := x.lists.get(s, prev, level)
		if err != nil {
			return 0, 0, err
		}
		// Vectors are prefetched a window ahead of the distances.
		w := 4 * prefetchWindow(x.codeSize)
		x.vecs.prefetch(list[:min(w, len(list))])
		for j := 0; j+4 <= len(list); j += 4 {
			v := int32(binary.LittleEndian.Uint32(list[j:]))
			if v < 0 {
				break
			}
			if a := j + w; a+4 <= len(list) {
				x.vecs.prefetch(list[a : a+4])
			}
			if err := x.checkNeighbor(prev, level, v); err != nil {
				return 0, 0, err
			}
			d, err := x.vecs.dist(s, v)
			if err != nil {
				return 0, 0, err
			}
			if d < dn {
				nearest, dn = v, d
			}
		}
		if nearest == prev {
			return nearest, dn, nil
		}
	}
}

// searchLevel is LEVEL (search_from_candidates): the pool s.pool seeds it;
// results go to r. It returns r's size.
func (x *Index) searchLevel(s *scratch, level int, r *resultHeap, efStop int) (int, error) {
	c := &s.pool
	for i := 0; i < c.size(); i++ {
		v, d := c.ids[i], c.dis[i]
		if s.allows(v) {
			r.offer(d, v)
		}
		s.visit(v)
	}
	ndis := 0
	for c.size() > 0 {
		if level == 0 && s.st.Expanded%deadlineEvery == 0 && s.pastDeadline() {
			return 0, ErrDeadline
		}
		v0, d0, next := c.popMin()
		if v0 < 0 {
			break
		}
		if c.atLeastBelow(d0, efStop) {
			break
		}
		if next >= 0 {
			// The runner-up is expanded next unless one of v0's neighbors
			// beats it: start loading its list now (a cache miss otherwise
			// stalls the loop below on the list's first slot).
			x.lists.prefetch(next, level)
		}
		var list []byte
		var err error
		if level == 0 && x.listBatch != nil {
			list, err = x.levelZeroList(s, c, v0, efStop)
		} else {
			list, err = x.lists.get(s, v0, level)
		}
		if err != nil {
			return 0, err
		}
		// Mark the unvisited neighbors first, then get their distances
		// together (one batch of reads, or prefetches so the misses
		// overlap), then offer and push in list order: the same sequence
		// as one neighbor at a time (FAISS ≥ 1.8 batches too).
		s.cand = s.cand[:0]
		for j := 0; j+4 <= len(list); j += 4 {
			v1 := int32(binary.LittleEndian.Uint32(list[j:]))
			if v1 < 0 {
				break
			}
			if err := x.checkNeighbor(v0, level, v1); err != nil {
				return 0, err
			}
			if !s.visit(v1) {
				s.cand = append(s.cand, v1)
			}
		}
		dis := s.cdis[:len(s.cand)]
		if err := x.vecs.dists(s, level, s.cand, dis); err != nil {
			return 0, err
		}
		ndis += len(s.cand)
		for i, v1 := range s.cand {
			if s.allows(v1) {
				r.offer(dis[i], v1)
			}
			c.push(v1, dis[i])
		}
		if level == 0 {
			s.st.Expanded++
		}
	}
	if level == 0 {
		s.st.NDisLevel0 += ndis
		s.st.PoolEmptied = c.size() == 0
		s.st.PoolCapacity = c.n
	}
	s.st.poppedEvictions += c.poppedEvictions
	return r.n, nil
}

// beamSearch is FAISS 1.7.3's upper_beam > 1 variant (docs/hnsw-search.md §5.5):
// a pool of upper_beam entries on every level, no parameters or filter.
func (x *Index) beamSearch(s *scratch, k int) error {
	h := x.h
	b := int(h.UpperBeam)
	s.beam.reset(b, false)
	d0, err := x.vecs.dist(s, h.EntryPoint)
	if err != nil {
		return err
	}
	s.beam.dis[0], s.beam.ids[0], s.beam.n = d0, h.EntryPoint, 1
	sel := s.sel
	s.sel = nil
	defer func() { s.sel = sel }()
	for l := int(h.MaxLevel); l >= 0; l-- {
		s.pool.reset(b, false)
		for i := 0; i < s.beam.n; i++ {
			s.pool.push(s.beam.ids[i], s.beam.dis[i])
		}
		s.advance()
		if l == 0 {
			_, err = x.searchLevel(s, 0, &s.res, int(x.efSearch))
		} else {
			s.beam.n = 0
			_, err = x.searchLevel(s, l, &s.beam, int(x.efSearch))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// exactScan offers every allowed id (ascending), as OpenSearch does for
// small filters under modern semantics.
func (x *Index) exactScan(s *scratch) error {
	s.st.ExactScan = true
	n := 0
	for w, word := range s.sel {
		for word != 0 {
			bit := word & -word
			v := int32(w*64 + bits.TrailingZeros64(bit))
			word ^= bit
			if n++; n%deadlineEvery == 0 && s.pastDeadline() {
				return ErrDeadline
			}
			d, err := x.vecs.dist(s, v)
			if err != nil {
				return err
			}
			s.res.offer(d, v)
		}
	}
	return nil
}

// output sorts R by (distance, internal id), fills to k, applies the
// metric's sign and the id map (docs/hnsw-search.md §1 steps 5–7, §8).
func (x *Index) output(s *scratch, k int, dst []Result) ([]Result, Stats, error) {
	r := &s.res
	s.pairs = s.pairs[:0]
	for i := 0; i < r.n; i++ {
		s.pairs = append(s.pairs, pair{r.dis[i], r.ids[i]})
	}
	slices.SortFunc(s.pairs, func(a, b pair) int {
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	fill := float32(fltMax)
	switch {
	case x.binary:
		fill = -2147483648 // FLT_MAX converted to int32 on x86
	case x.kind == flatIP || x.kind == sqIP || x.kind == sqIntIP:
		fill = -fltMax
	}
	for _, pr := range s.pairs {
		d := pr.d
		switch {
		case x.binary:
			d = float32(int32(math.Round(float64(d))))
		case fill < 0:
			d = -d
		}
		id, err := x.externalID(s, pr.id)
		if err != nil {
			return dst, s.st, err
		}
		dst = append(dst, Result{ID: id, Distance: d, Label: pr.id})
	}
	for i := len(s.pairs); i < k; i++ {
		dst = append(dst, Result{ID: -1, Distance: fill, Label: -1})
	}
	return dst, s.st, nil
}

func (s *scratch) allows(v int32) bool {
	return s.sel == nil || s.sel[v>>6]&(1<<uint(v&63)) != 0
}

func (x *Index) checkNeighbor(node int32, level int, v int32) error {
	if v >= x.n || (level > 0 && x.h.NumLevels(v) <= level) {
		return fmt.Errorf("%w: neighbor id %d of node %d on level %d is out of range or not on that level (run inspect --verify)", ErrCorrupt, v, node, level)
	}
	return nil
}

func (x *Index) exactFilterMax() int {
	switch m := x.opts.ExactFilterMax; {
	case m == 0:
		return DefaultExactFilterMax
	case m < 0:
		return 0
	default:
		return m
	}
}
