package hnswsearch

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// indexEfRuns is what FAISS 1.7.3 returned with index.hnsw.efSearch set
// (NAME.index_ef.json, testdata/gen_fixtures.py index_ef_fixtures).
type indexEfRuns struct {
	testfixtures.Search
	StoredEf int          `json:"stored_ef_search"`
	Runs     []indexEfRun `json:"runs"`
}

type indexEfRun struct {
	testfixtures.Run
	IndexEf int `json:"index_ef_search"`
}

func loadIndexEfRuns(t *testing.T) []indexEfRuns {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(fixtureDir, "*.index_ef.json"))
	require.NotEmpty(t, paths, "no index_ef fixtures")
	var out []indexEfRuns
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var r indexEfRuns
		require.NoError(t, json.Unmarshal(b, &r), p)
		require.NotEmpty(t, r.Runs, p)
		out = append(out, r)
	}
	return out
}

func (r indexEfRun) params() Params {
	p := Params{K: r.K, Filter: r.AllowIDs}
	if r.EfSearch != nil {
		p.EfSearch = *r.EfSearch
	}
	return p
}

func (r indexEfRun) String() string {
	ef := "none"
	if r.EfSearch != nil {
		ef = fmt.Sprint(*r.EfSearch)
	}
	return fmt.Sprintf("index ef %d, k %d, per-query ef %s, filter %d ids", r.IndexEf, r.K, ef, len(r.AllowIDs))
}

// TestIndexEfSearchParity: Options.IndexEfSearch = N gives, with faiss-1.7.3
// semantics and the exact kernel, FAISS 1.7.3's results with
// index.hnsw.efSearch = N (ids identical, distances bit-identical, hnsw_stats
// equal), N ∈ {16, 64, 256}, k ∈ {1, 10, 100}, with and without filters and
// per-query efSearch on top, on every backend.
func TestIndexEfSearchParity(t *testing.T) {
	runs := loadIndexEfRuns(t)
	for fi, fr := range runs {
		t.Run(fr.Fixture, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, filepath.Join(fixtureDir, fr.Fixture+".faiss"), fi, len(runs), func(t *testing.T, name string, s partial.Storage, batch bool) {
				byEf := map[int]*Index{}
				for ri, run := range fr.Runs {
					x := byEf[run.IndexEf]
					if x == nil {
						o := parityOptions(t, name, s, batch)
						o.IndexEfSearch = run.IndexEf
						x = openIndex(t, s, o)
						require.Equal(t, run.IndexEf, x.EfSearch())
						require.Equal(t, fr.StoredEf, x.StoredEfSearch())
						byEf[run.IndexEf] = x
					}
					var n1, n2, n3 int
					for qi := range fr.Queries {
						q, qb := fr.Query(qi)
						res, st, err := searchOne(x, q, qb, run.params())
						require.NoError(t, err)
						what := fmt.Sprintf("%s run %d (%v) query %d", name, ri, run, qi)
						sameResults(t, what, res, run.IDs[qi], run.Dist[qi])
						n1++
						if st.PoolEmptied {
							n2++
						}
						n3 += st.NDisLevel0
					}
					// FAISS 1.7.3's IndexBinaryHNSW does not update hnsw_stats.
					if !fr.Binary {
						assert.Equal(t, run.Stats, struct{ N1, N2, N3 int }{n1, n2, n3}, "%s run %d (%v): hnsw_stats", name, ri, run)
					}
				}
			})
		})
	}
}

// TestIndexEfSearchIsNotPerQueryEf: the references tell the attribute from
// the per-query value and from the stored one. With FAISS 1.7.3 the
// attribute also sizes the candidate pool, so the per-query form
// (Params.EfSearch = N on the stored efSearch) returns other results for
// some queries; and different N return different results.
func TestIndexEfSearchIsNotPerQueryEf(t *testing.T) {
	perQueryDiffers, efDiffers := 0, 0
	for _, fr := range loadIndexEfRuns(t) {
		s := openFixture(t, fr.Fixture, storage.Options{Backend: "memory"})
		stored := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Exact})
		byKey := map[string][][]int64{}
		for _, run := range fr.Runs {
			if run.EfSearch != nil {
				continue
			}
			key := fmt.Sprint(run.K, len(run.AllowIDs))
			if prev, ok := byKey[key]; ok { // the same k and filter, the previous N
				for qi := range fr.Queries {
					if !slices.Equal(prev[qi], run.IDs[qi]) {
						efDiffers++
					}
				}
			}
			byKey[key] = run.IDs
			if fr.Binary || run.IndexEf == fr.StoredEf {
				continue // 1.7.3 takes no per-query parameters on binary indexes
			}
			p := run.params()
			p.EfSearch = run.IndexEf
			for qi := range fr.Queries {
				q, qb := fr.Query(qi)
				res, _, err := searchOne(stored, q, qb, p)
				require.NoError(t, err)
				got := make([]int64, len(res))
				for j := range res {
					got[j] = res[j].ID
				}
				if !slices.Equal(got, run.IDs[qi]) {
					perQueryDiffers++
				}
			}
		}
	}
	t.Logf("per-query ef differs from the attribute on %d query rows; changing the attribute changes %d rows", perQueryDiffers, efDiffers)
	assert.Positive(t, perQueryDiffers, "the fixtures no longer tell the attribute from the per-query ef")
	assert.Positive(t, efDiffers, "the fixtures' results do not depend on the attribute")
}

func TestIndexEfSearchOption(t *testing.T) {
	s := openFixture(t, "hnsw_flat_l2", storage.Options{Backend: "memory"})
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	require.NoError(t, err)
	for _, bad := range []int{-1, MaxEfSearch + 1} {
		_, err := New(context.Background(), f, s, Options{IndexEfSearch: bad})
		require.ErrorIs(t, err, ErrBadOption)
		assert.Contains(t, err.Error(), fmt.Sprintf("index ef_search %d is out of range [1, %d]", bad, MaxEfSearch))
	}
	x := openIndex(t, s, Options{})
	assert.Equal(t, 16, x.EfSearch())
	assert.Equal(t, 16, x.StoredEfSearch())
	x = openIndex(t, s, Options{IndexEfSearch: MaxEfSearch})
	assert.Equal(t, MaxEfSearch, x.EfSearch())
	assert.Equal(t, 16, x.StoredEfSearch())
}

// corruptCopy writes a copy of fixture name, changed by patch, and returns
// its path.
func corruptCopy(t *testing.T, name string, patch func(b []byte, f *faissfmt.File)) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name+".faiss"))
	require.NoError(t, err)
	f, err := faissfmt.Open(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	patch(b, f)
	p := filepath.Join(t.TempDir(), name+".faiss")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func openPath(t *testing.T, path, backend string) partial.Storage {
	t.Helper()
	s, err := storage.Open(context.Background(), path, storage.Options{Backend: storage.Backend(backend), CacheBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func newFrom(s partial.Storage, o Options) (*Index, error) {
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	if err != nil {
		return nil, err
	}
	return New(context.Background(), f, s, o)
}

// TestFullModeChecksNeighbors: a neighbor id out of range on a node other
// than the entry point (which Open does not read) fails New under FullMode
// with a faissfmt.ErrFormat error naming node, level and slot; without it
// New succeeds (the search would meet it only on that node). The check runs
// on the in-memory view and, given FullMode on another backend, streamed.
func TestFullModeChecksNeighbors(t *testing.T) {
	var node int32
	path := corruptCopy(t, "hnsw_flat_l2", func(b []byte, f *faissfmt.File) {
		h := f.Graph.HNSW
		node = (h.EntryPoint + 1) % 500
		lo, _ := h.NeighborSlots(node, 0)
		binary.LittleEndian.PutUint32(b[h.Neighbors.Offset+4*(lo+2):], 500)
	})
	for _, backend := range []string{"memory", "mmap", "pread"} {
		s := openPath(t, path, backend)
		x, err := newFrom(s, Options{})
		require.NoError(t, err, backend)
		x.Close()
		_, err = newFrom(s, Options{FullMode: true})
		require.ErrorIs(t, err, faissfmt.ErrFormat, backend)
		assert.Contains(t, err.Error(), fmt.Sprintf("neighbor id 500 at node %d level 0 is out of range [0, 500) (slot 2, byte", node), backend)
	}
	// A FAISS-written file passes, on every backend.
	for name, s := range backends(t, filepath.Join(fixtureDir, "hnsw_flat_large.faiss")) {
		x, err := newFrom(s, Options{FullMode: true})
		require.NoError(t, err, name)
		x.Close()
	}
}

// TestChecksumAtLoad: an OpenSearch file whose footer CRC does not match
// fails New under FullMode and, on memory_efficient backends, with
// VerifyChecksum, naming the expected and actual CRC; otherwise it loads.
func TestChecksumAtLoad(t *testing.T) {
	var stored uint64
	path := corruptCopy(t, "opensearch_0_165_vec", func(b []byte, f *faissfmt.File) {
		codes, _ := f.Storage.Section("codes")
		b[codes.Offset+5] ^= 0x10 // one vector's bit: searches would not notice
		stored = f.Footer.Checksum
	})
	want := fmt.Sprintf("Lucene footer checksum mismatch: the footer at byte 68039 expects CRC-32 %#08x, the file's first 68039 bytes have 0x", stored)
	for _, backend := range []string{"memory", "mmap", "pread", "direct"} {
		s := openPath(t, path, backend)
		x, err := newFrom(s, Options{})
		require.NoError(t, err, backend)
		x.Close()
		for _, o := range []Options{{VerifyChecksum: true}, {FullMode: true}} {
			_, err = newFrom(s, o)
			require.ErrorIs(t, err, faissfmt.ErrFormat, "%s %+v", backend, o)
			assert.Contains(t, err.Error(), want, backend)
		}
	}
	good := filepath.Join(fixtureDir, "opensearch_0_165_vec.faiss")
	for name, s := range backends(t, good) {
		x, err := newFrom(s, Options{VerifyChecksum: true, FullMode: true})
		require.NoError(t, err, name)
		x.Close()
	}
	// Plain FAISS files have no checksum: nothing to check.
	s := openFixture(t, "idmap_hnsw", storage.Options{Backend: "memory"})
	x, err := newFrom(s, Options{VerifyChecksum: true, FullMode: true})
	require.NoError(t, err)
	x.Close()
}
