package hnswsearch

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
)

// readAtOnly is a partial.Storage offering nothing but ReadAtContext (no
// views, no batches, no block cache, no I/O tally): every byte a search
// uses is one read, which the Trace records.
type readAtOnly struct {
	tr   *partialtest.Trace
	size int64
}

func (s *readAtOnly) ReadAtContext(_ context.Context, p []byte, off int64, _ *partial.Tally) (int, error) {
	return s.tr.ReadAt(p, off)
}
func (s *readAtOnly) Size() int64  { return s.size }
func (s *readAtOnly) Close() error { return nil }

var _ partial.Storage = (*readAtOnly)(nil)

// traceModel knows where every list, vector and id-map entry of one fixture
// lies, and replays the reads a query must make (see check).
type traceModel struct {
	data  []byte // the file
	h     *faissfmt.HNSW
	n     int32
	nb    faissfmt.Section
	codes faissfmt.Section
	cs    int64
	idMap *faissfmt.Section
	lists map[int64]listRef // by byte offset in the file
}

type listRef struct {
	node  int32
	level int
	n     int64 // bytes
}

func newTraceModel(data []byte, f *faissfmt.File) (*traceModel, error) {
	m := &traceModel{data: data, h: f.Graph.HNSW, n: int32(f.Graph.NTotal), nb: f.Graph.HNSW.Neighbors, cs: f.Storage.CodeSize, lists: map[int64]listRef{}}
	m.codes, _ = f.Storage.Section("codes")
	if f.IDMap != nil {
		s, _ := f.IDMap.Section("id_map")
		m.idMap = &s
	}
	for v := range m.n {
		for l := range m.h.NumLevels(v) {
			b, e := m.h.NeighborSlots(v, l)
			off := m.nb.Offset + 4*b
			if _, dup := m.lists[off]; dup {
				return nil, fmt.Errorf("two lists start at byte %d", off)
			}
			m.lists[off] = listRef{node: v, level: l, n: 4 * (e - b)}
		}
	}
	return m, nil
}

// neighbors is node v's list on level l up to its first −1.
func (m *traceModel) neighbors(v int32, l int) []int32 {
	b, e := m.h.NeighborSlots(v, l)
	var out []int32
	for i := b; i < e; i++ {
		w := int32(binary.LittleEndian.Uint32(m.data[m.nb.Offset+4*i:]))
		if w < 0 {
			break
		}
		out = append(out, w)
	}
	return out
}

// externalID is id_map[label] as stored (label itself without an id map).
func (m *traceModel) externalID(label int32) int64 {
	if m.idMap == nil {
		return int64(label)
	}
	return int64(binary.LittleEndian.Uint64(m.data[m.idMap.Offset+8*int64(label):]))
}

// internalIDs are the labels whose external ids are in ids, ascending.
func (m *traceModel) internalIDs(ids []int64) []int32 {
	allow := map[int64]bool{}
	for _, id := range ids {
		allow[id] = true
	}
	var out []int32
	for v := range m.n {
		if allow[m.externalID(v)] {
			out = append(out, v)
		}
	}
	return out
}

type readKind uint8

const (
	listRead readKind = iota
	vectorRead
	idRead
)

// access is one classified read: a list (node, level), a vector (node) or an
// id-map entry (node = label).
type access struct {
	kind  readKind
	node  int32
	level int
}

func (a access) String() string {
	switch a.kind {
	case listRead:
		return fmt.Sprintf("list(%d, level %d)", a.node, a.level)
	case vectorRead:
		return fmt.Sprintf("vector(%d)", a.node)
	}
	return fmt.Sprintf("id_map[%d]", a.node)
}

// classify says which one list, vector or id-map entry r reads exactly, or
// why it is none of them.
func (m *traceModel) classify(r [2]int64) (access, error) {
	off, n := r[0], r[1]
	if l, ok := m.lists[off]; ok && n == l.n {
		return access{listRead, l.node, l.level}, nil
	}
	if rel := off - m.codes.Offset; rel >= 0 && off+n <= m.codes.Offset+m.codes.Len && rel%m.cs == 0 && n == m.cs {
		return access{kind: vectorRead, node: int32(rel / m.cs)}, nil
	}
	if s := m.idMap; s != nil {
		if rel := off - s.Offset; rel >= 0 && off+n <= s.Offset+s.Len && rel%8 == 0 && n == 8 {
			return access{kind: idRead, node: int32(rel / 8)}, nil
		}
	}
	return access{}, fmt.Errorf("read of %d bytes at %d is not exactly one neighbor list (section at %d, %d bytes), vector (at %d, %d bytes of %d each) or id-map entry",
		n, off, m.nb.Offset, m.nb.Len, m.codes.Offset, m.codes.Len, m.cs)
}

// stripReverseMap removes the reads that build the reverse id map (external
// → internal ids) at the start of reads: contiguous ranges covering exactly
// the id_map section. It reports whether they were there.
func (m *traceModel) stripReverseMap(reads [][2]int64) ([][2]int64, bool) {
	if m.idMap == nil {
		return reads, false
	}
	next, end := m.idMap.Offset, m.idMap.Offset+m.idMap.Len
	for i, r := range reads {
		if r[0] != next {
			return reads, false
		}
		if next += r[1]; next == end {
			return reads[i+1:], true
		}
	}
	return reads, false
}

// check replays the reads one query must make on a storage with only ReadAt
// and no memory held (default Options), and returns the first read that
// differs, or a Stats count that disagrees with the reads. allowed are the
// filter's internal ids (nil without a filter).
//
// Exact scan: the allowed ids' vectors, ascending, nothing else.
//
// Graph search (FAISS's order of operations):
//   - the entry point's vector;
//   - on each level from max_level down to 1, the greedy descent: the list
//     of the current nearest node, then every vector in it in list order,
//     and again from the neighbor that improved, until a pass improves
//     nothing. There is no visited table there, so a vector may be read
//     again in a later pass or on a lower level (FAISS's
//     greedy_update_nearest recomputes it too); each node's list is read
//     at most once per level, as the nearest distance strictly decreases;
//   - on level 0, from the node the descent ended on (whose distance is
//     kept, not recomputed): each expanded node's list once, then the
//     vectors of its neighbors not yet visited on level 0, in list order.
//     So on level 0 each vector is read at most once, and each expanded
//     node is one whose vector was read (it was in the pool).
//
// Then one id-map entry per returned hit, in result order.
func (m *traceModel) check(reads [][2]int64, allowed []int32, res []Result, st Stats) error {
	acc := make([]access, len(reads))
	var bytes int64
	var nVec, nL0 int
	for i, r := range reads {
		a, err := m.classify(r)
		if err != nil {
			return fmt.Errorf("read %d of %d: %w", i, len(reads), err)
		}
		acc[i], bytes = a, bytes+r[1]
		switch {
		case a.kind == vectorRead:
			nVec++
		case a.kind == listRead && a.level == 0:
			nL0++
		}
	}
	if st.Reads != int64(len(reads)) || st.BytesRead != bytes || st.NDis != nVec || st.Expanded != nL0 {
		return fmt.Errorf("stats reads=%d bytes=%d ndis=%d expanded=%d; trace: %d reads, %d bytes, %d vectors, %d level-0 lists",
			st.Reads, st.BytesRead, st.NDis, st.Expanded, len(reads), bytes, nVec, nL0)
	}

	// The tail: one id-map entry per hit.
	body := acc
	if m.idMap != nil {
		var labels []int32
		for _, r := range res {
			if r.Label >= 0 {
				labels = append(labels, r.Label)
			}
		}
		if len(body) < len(labels) {
			return fmt.Errorf("%d reads, %d hits to map", len(body), len(labels))
		}
		tail := body[len(body)-len(labels):]
		for i, a := range tail {
			if a.kind != idRead || a.node != labels[i] {
				return fmt.Errorf("read %d is %v, want id_map[%d] for hit %d", len(body)-len(labels)+i, a, labels[i], i)
			}
		}
		body = body[:len(body)-len(labels)]
	}
	for _, r := range res {
		if r.Label >= 0 && r.ID != m.externalID(r.Label) {
			return fmt.Errorf("hit label %d has id %d, id_map says %d", r.Label, r.ID, m.externalID(r.Label))
		}
	}

	i := 0
	want := func(w access) error {
		if i >= len(body) {
			return fmt.Errorf("reads end at %d, want %v next", i, w)
		}
		if body[i] != w {
			return fmt.Errorf("read %d is %v, want %v", i, body[i], w)
		}
		i++
		return nil
	}
	vectors := func(ids []int32) error {
		for _, v := range ids {
			if err := want(access{kind: vectorRead, node: v}); err != nil {
				return err
			}
		}
		return nil
	}
	if st.ExactScan {
		if err := vectors(allowed); err != nil {
			return fmt.Errorf("exact scan: %w", err)
		}
	} else if len(body) > 0 {
		cur := m.h.EntryPoint
		if err := vectors([]int32{cur}); err != nil {
			return fmt.Errorf("entry point: %w", err)
		}
		for l := int(m.h.MaxLevel); l >= 1; l-- {
			seen := map[int32]bool{cur: true}
			if err := want(access{listRead, cur, l}); err != nil {
				return fmt.Errorf("greedy descent on level %d: %w", l, err)
			}
			nb := m.neighbors(cur, l)
			if err := vectors(nb); err != nil {
				return fmt.Errorf("greedy descent from %d on level %d: %w", cur, l, err)
			}
			// The next pass starts from the neighbor that improved.
			for i < len(body) && body[i].kind == listRead && body[i].level == l {
				w := body[i].node
				if !slices.Contains(nb, w) || seen[w] {
					return fmt.Errorf("read %d is %v: not a new neighbor of %d on level %d", i, body[i], cur, l)
				}
				i++
				cur, seen[w] = w, true
				nb = m.neighbors(cur, l)
				if err := vectors(nb); err != nil {
					return fmt.Errorf("greedy descent from %d on level %d: %w", cur, l, err)
				}
			}
		}
		visited := map[int32]bool{cur: true}
		expanded := map[int32]bool{}
		for first := true; i < len(body); first = false {
			a := body[i]
			if a.kind != listRead || a.level != 0 || !visited[a.node] || expanded[a.node] || (first && a.node != cur) {
				return fmt.Errorf("level 0: read %d is %v: not the list of a visited, unexpanded node (descent ended on %d)", i, a, cur)
			}
			i++
			expanded[a.node] = true
			var cand []int32
			for _, w := range m.neighbors(a.node, 0) {
				if !visited[w] {
					visited[w] = true
					cand = append(cand, w)
				}
			}
			if err := vectors(cand); err != nil {
				return fmt.Errorf("level 0, unvisited neighbors of %d: %w", a.node, err)
			}
		}
		if nL0Vec := len(visited) - 1; nL0 > 0 && st.NDisLevel0 != nL0Vec {
			return fmt.Errorf("stats ndis_level0=%d, trace: %d level-0 vectors", st.NDisLevel0, nL0Vec)
		}
	}
	if i != len(body) {
		return fmt.Errorf("read %d is %v, after the search's last expected read", i, body[i])
	}
	return nil
}

// traceFixtures are float HNSW files without and with id maps.
var traceFixtures = []string{"hnsw_flat_l2", "hnsw_flat_ip", "hnsw_flat_large", "idmap_hnsw", "idmap2_hnsw"}

// openTraced opens fixture name on a readAtOnly storage: the index, its
// trace, the model of its layout, and the reads of the open (parse and New).
func openTraced(t *testing.T, name string, o Options) (*Index, *partialtest.Trace, *traceModel, [][2]int64) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, name+".faiss"))
	require.NoError(t, err)
	tr := &partialtest.Trace{R: &bytesReaderAt{data}}
	s := &readAtOnly{tr: tr, size: int64(len(data))}
	var st partial.Storage = s
	for what, ok := range map[string]bool{"Viewer": is[partial.Viewer](st), "BatchReader": is[partial.BatchReader](st),
		"BlockViewer": is[partial.BlockViewer](st), "FileChecker": is[partial.FileChecker](st)} {
		require.False(t, ok, "the traced storage is a %s", what)
	}
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	require.NoError(t, err)
	require.NotNil(t, f.Graph)
	require.Nil(t, f.Storage.SQ, "%s: the model expects flat float vectors", name)
	x, err := New(context.Background(), f, s, o)
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	m, err := newTraceModel(data, f)
	require.NoError(t, err)
	return x, tr, m, tr.Snapshot()
}

func is[T any](s partial.Storage) bool { _, ok := s.(T); return ok }

// bytesReaderAt is ReadAt over bytes, failing on short reads as
// partial.Storage requires (so the trace stays under the wrapper's
// contract).
type bytesReaderAt struct{ b []byte }

func (r *bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(r.b)) {
		return 0, fmt.Errorf("read of %d bytes at %d past %d: %w", len(p), off, len(r.b), io.ErrUnexpectedEOF)
	}
	return copy(p, r.b[off:]), nil
}

// TestSearchReadsOnlyVisited: on a storage with nothing but ReadAt, a query
// with default Options (memory_efficient, no memory held) reads exactly the
// neighbor lists of the nodes it expands, the vectors of the nodes whose
// distances it computes and the id-map entries of its hits, one read each,
// in FAISS's order (traceModel.check), and its Stats count those reads.
// The open reads no vector. Filtered queries run twice: through the exact
// scan (default Options) and through the graph (ExactFilterMax < 0).
//
// One exception, asserted exactly: the first filtered query of an index
// with an id map reads the whole id map (in chunks) to build the reverse
// map external → internal ids, and does not count it in its Stats.
func TestSearchReadsOnlyVisited(t *testing.T) {
	for _, name := range traceFixtures {
		fr := runsOf(t, name)
		var filters [][]int64
		for _, run := range fr.Runs {
			if run.AllowIDs != nil && !slices.ContainsFunc(filters, func(f []int64) bool { return slices.Equal(f, run.AllowIDs) }) {
				filters = append(filters, run.AllowIDs)
			}
		}
		require.NotEmpty(t, filters, "%s has no filtered runs", name)
		for _, oc := range []struct {
			name string
			o    Options
		}{{"default", Options{}}, {"graph-filter", Options{ExactFilterMax: -1}}} {
			t.Run(name+"/"+oc.name, func(t *testing.T) {
				x, tr, m, open := openTraced(t, name, oc.o)
				for _, r := range open {
					assert.False(t, r[0] < m.codes.Offset+m.codes.Len && r[0]+r[1] > m.codes.Offset,
						"the open read %d bytes at %d, inside the vectors [%d, %d)", r[1], r[0], m.codes.Offset, m.codes.Offset+m.codes.Len)
				}
				t.Logf("open: %d reads", len(open))
				var queries, exact, graphFiltered, l0, upperRepeats int
				reverseBuilt := false
				for _, filter := range append([][]int64{nil}, filters...) {
					allowed := m.internalIDs(filter)
					for _, ef := range []int{0, 10, 40, 128} {
						p := Params{K: 10, EfSearch: ef, Filter: filter}
						for qi := range fr.Queries {
							q, _ := fr.Query(qi)
							n0 := tr.Len()
							res, st, err := x.Search(q, p, nil)
							require.NoError(t, err)
							reads := tr.Since(n0)
							// The first filtered query of an index with an id
							// map reads the whole id map once to build the
							// reverse map (filter.go), outside the query's
							// Stats; later ones do not.
							if filter != nil && m.idMap != nil {
								var stripped bool
								reads, stripped = m.stripReverseMap(reads)
								require.Equal(t, !reverseBuilt, stripped, "query %d ef %d: reverse-map reads present", qi, ef)
								reverseBuilt = true
							}
							require.NoError(t, m.check(reads, allowed, res, st), "query %d ef %d filter %d ids, stats %+v", qi, ef, len(filter), st)
							queries++
							if st.ExactScan {
								exact++
								require.NotNil(t, filter)
							} else if filter != nil {
								graphFiltered++
							}
							l0 += st.Expanded
							upperRepeats += repeatedUpperVectors(m, reads)
						}
					}
				}
				t.Logf("%d queries (%d exact scans, %d filtered graph searches), %d level-0 expansions, %d vectors read again on upper levels",
					queries, exact, graphFiltered, l0, upperRepeats)
				if oc.o.ExactFilterMax < 0 {
					assert.Positive(t, graphFiltered, "no filtered query searched the graph")
				} else {
					assert.Positive(t, exact, "no filtered query took the exact scan")
				}
				assert.Positive(t, l0)
			})
		}
	}
}

// repeatedUpperVectors counts vectors read more than once before the first
// level-0 list (the greedy descent recomputes them; see check).
func repeatedUpperVectors(m *traceModel, reads [][2]int64) int {
	seen := map[int32]bool{}
	n := 0
	for _, r := range reads {
		a, err := m.classify(r)
		if err != nil || a.kind == listRead && a.level == 0 {
			break
		}
		if a.kind == vectorRead {
			if seen[a.node] {
				n++
			}
			seen[a.node] = true
		}
	}
	return n
}

// TestTraceCheckCatches: check rejects a query's real reads with a whole
// section read added, a read dropped, a list read twice, a vector read
// again on level 0, or a stray id-map read, so TestSearchReadsOnlyVisited
// can fail.
func TestTraceCheckCatches(t *testing.T) {
	x, tr, m, _ := openTraced(t, "idmap_hnsw", Options{})
	fr := runsOf(t, "idmap_hnsw")
	q, _ := fr.Query(0)
	n0 := tr.Len()
	res, st, err := x.Search(q, Params{K: 10, EfSearch: 40}, nil)
	require.NoError(t, err)
	reads := tr.Since(n0)
	require.NoError(t, m.check(reads, nil, res, st))
	require.Greater(t, st.Expanded, 2)

	// The first level-0 list read, and the first vector read after it.
	l0 := slices.IndexFunc(reads, func(r [2]int64) bool {
		a, _ := m.classify(r)
		return a.kind == listRead && a.level == 0
	})
	require.GreaterOrEqual(t, l0, 0)
	vec := l0 + 1 + slices.IndexFunc(reads[l0+1:], func(r [2]int64) bool {
		a, _ := m.classify(r)
		return a.kind == vectorRead
	})
	require.Greater(t, vec, l0)

	cases := map[string]func([][2]int64) [][2]int64{
		"whole vectors section": func(r [][2]int64) [][2]int64 {
			return slices.Insert(r, vec, [2]int64{m.codes.Offset, m.codes.Len})
		},
		"whole neighbors section": func(r [][2]int64) [][2]int64 {
			return slices.Insert(r, l0, [2]int64{m.nb.Offset, m.nb.Len})
		},
		"two vectors in one read": func(r [][2]int64) [][2]int64 {
			r[vec][1] *= 2
			return r
		},
		"a vector read dropped": func(r [][2]int64) [][2]int64 { return slices.Delete(r, vec, vec+1) },
		"a list read twice": func(r [][2]int64) [][2]int64 {
			return slices.Insert(r, len(r)-len(res), r[l0])
		},
		"a level-0 vector read again": func(r [][2]int64) [][2]int64 {
			return slices.Insert(r, vec+1, r[vec])
		},
		"a stray id-map read": func(r [][2]int64) [][2]int64 {
			return slices.Insert(r, vec, [2]int64{m.idMap.Offset, 8})
		},
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		r := cases[name](slices.Clone(reads))
		assert.Error(t, m.check(r, nil, res, statsOf(m, r, st)), name)
	}
	// Stats that disagree with the reads.
	bad := st
	bad.NDis++
	assert.Error(t, m.check(reads, nil, res, bad), "ndis off by one")
	bad = st
	bad.Expanded--
	assert.Error(t, m.check(reads, nil, res, bad), "expanded off by one")
}

// statsOf is st with the counts check compares set to agree with reads,
// so that check fails on the reads themselves.
func statsOf(m *traceModel, reads [][2]int64, st Stats) Stats {
	st.Reads, st.BytesRead, st.NDis, st.Expanded, st.NDisLevel0 = int64(len(reads)), 0, 0, 0, 0
	for _, r := range reads {
		st.BytesRead += r[1]
		a, err := m.classify(r)
		switch {
		case err != nil:
		case a.kind == vectorRead:
			st.NDis++
			if st.Expanded > 0 {
				st.NDisLevel0++
			}
		case a.kind == listRead && a.level == 0:
			st.Expanded++
		}
	}
	return st
}
