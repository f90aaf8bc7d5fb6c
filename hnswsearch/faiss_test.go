package hnswsearch

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/longtests"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
	"github.com/stretchr/testify/require"
)

const fixtureDir = "../testdata/fixtures"

// faissRuns is what FAISS 1.7.3 returned (testdata/gen_fixtures.py).
type faissRuns = testfixtures.Search

// runsOf returns FAISS's runs on the fixture name.
func runsOf(t testing.TB, name string) faissRuns {
	t.Helper()
	for _, r := range loadRuns(t) {
		if r.Fixture == name {
			return r
		}
	}
	t.Fatalf("no FAISS runs for fixture %s", name)
	return faissRuns{}
}

// openFixture opens the fixture name's index file with o; it is closed when
// the test ends.
func openFixture(t testing.TB, name string, o storage.Options) partial.Storage {
	t.Helper()
	s, err := storage.Open(context.Background(), filepath.Join(fixtureDir, name+".faiss"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// allRuns parses every fixture's FAISS runs once per test binary (about
// 0.3 s under -race, and many tests ask for them); callers only read them.
var allRuns = sync.OnceValues(func() ([]faissRuns, error) { return testfixtures.All(fixtureDir) })

func loadRuns(t testing.TB) []faissRuns {
	t.Helper()
	runs, err := allRuns()
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// backendNames are the ways backends opens a fixture: every backend, direct
// without a block cache, and the zstd copy where zstd is built in.
func backendNames() []string {
	names := []string{"memory", "mmap", "pread", "direct", "direct-uncached"}
	if zstd.Supported {
		names = append(names, "zstd")
	}
	return names
}

// openBackend opens the file at path through the backend called name (see
// backendNames); it is closed when the test ends.
func openBackend(t *testing.T, path, name string) partial.Storage {
	t.Helper()
	var o storage.Options
	switch name {
	case "direct-uncached":
		// direct without a block cache: the parity test gives it a vector cache.
		o = storage.Options{Backend: "direct"}
	case "zstd":
		zpath := filepath.Join(t.TempDir(), "idx.zst")
		in, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(zpath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := zstd.CompressSeekable(f, in, 4096, 3, nil); err != nil {
			t.Fatal(err)
		}
		in.Close()
		f.Close()
		path, o = zpath, storage.Options{CacheBytes: 64 << 10}
	default:
		o = storage.Options{Backend: storage.Backend(name), CacheBytes: 1 << 20}
	}
	s, err := storage.Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// backends opens the fixture through every backend (and its zstd copy).
func backends(t *testing.T, path string) map[string]partial.Storage {
	t.Helper()
	out := map[string]partial.Storage{}
	for _, name := range backendNames() {
		out[name] = openBackend(t, path, name)
	}
	return out
}

// forEachBackend runs fn in a parallel sub-test per backend and, where the
// backend batches reads (pread, direct), once more with batched reads
// ("NAME+batch-reads"); each sub-test opens its own storage. path is the
// i-th of the n fixtures the test runs it on: without -tags long the slow
// configurations run on a sample of them (sampled), so a test's "on every
// backend" holds with the tag.
func forEachBackend(t *testing.T, path string, i, n int, fn func(t *testing.T, name string, s partial.Storage, batch bool)) {
	for _, backend := range backendNames() {
		for _, batch := range []bool{false, true} {
			if batch && backend != "pread" && backend != "direct" && backend != "direct-uncached" {
				continue
			}
			name := backend
			if batch {
				name += "+batch-reads"
			}
			t.Run(name, func(t *testing.T) {
				if !sampled(name, i, n) {
					t.Skip("this configuration runs on other fixtures; on every one with -tags long")
				}
				t.Parallel()
				fn(t, name, openBackend(t, path, backend), batch)
			})
		}
	}
}

// slowBackends are the configurations that read every vector from the
// device (direct without a block cache) or decompress a zstd frame for it:
// nine tenths of forEachBackend's time under -race, for code paths one
// fixture exercises as well as twenty.
var slowBackends = []string{"direct-uncached", "direct-uncached+batch-reads", "zstd"}

// sampled reports whether forEachBackend runs configuration name on the
// i-th of a test's n fixtures. Every configuration runs on every fixture
// with -tags long; without it, each slow one runs on one fixture in seven
// (at least one per test), the others on all.
func sampled(name string, i, n int) bool {
	e := slices.Index(slowBackends, name)
	if longtests.On || e < 0 {
		return true
	}
	stride := min(n, 7)
	return e%stride == i%stride
}

// TestSampledCoversEveryConfiguration: without -tags long each slow
// configuration still runs on at least one fixture of every test that
// uses forEachBackend (3, 5 and 20 fixtures today), on one in seven at
// most; with it, on all.
func TestSampledCoversEveryConfiguration(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, len(loadRuns(t))} {
		for _, name := range slowBackends {
			runs := 0
			for i := range n {
				if sampled(name, i, n) {
					runs++
				}
			}
			if longtests.On {
				require.Equal(t, n, runs, "%s on %d fixtures", name, n)
			} else {
				require.Positive(t, runs, "%s on %d fixtures", name, n)
				require.LessOrEqual(t, runs, (n+6)/7, "%s on %d fixtures", name, n)
			}
		}
		require.True(t, sampled("memory", n-1, n), "the fast configurations run on every fixture")
	}
}

// queryStep is the stride over a test's queries on configuration name:
// without -tags long, a slow configuration whose test costs tens of
// seconds even on one fixture (range search on direct-uncached) searches
// every fifth query.
func queryStep(name string) int {
	if longtests.On || !slices.Contains(slowBackends, name) {
		return 1
	}
	return 5
}

// vectorCacheFor is a vector cache budget holding about n of s's vectors.
func vectorCacheFor(t *testing.T, s partial.Storage, n int64) int64 {
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	if err != nil {
		t.Fatal(err)
	}
	if f.Graph == nil {
		return 0
	}
	return 4*f.Graph.NTotal + n*(f.Storage.CodeSize+64+16)
}

func openIndex(t *testing.T, s partial.Storage, o Options) *Index {
	t.Helper()
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(context.Background(), f, s, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// runParams are the search parameters of a FAISS run: its k, filter and
// ef_search (when the run gives one).
func runParams(run testfixtures.Run) Params {
	p := Params{K: run.K, Filter: run.AllowIDs}
	if run.EfSearch != nil {
		p.EfSearch = *run.EfSearch
	}
	return p
}

// requireFAISSHits fails t unless res are FAISS's ids and distances (bit for
// bit) of run's query qi; what names the search in the message.
func requireFAISSHits(t *testing.T, run testfixtures.Run, qi int, res []Result, what string) {
	t.Helper()
	for j := range res {
		require.Equal(t, run.IDs[qi][j], res[j].ID, "%s rank %d", what, j)
		require.Equal(t, math.Float32bits(float32(run.Dist[qi][j])), math.Float32bits(res[j].Distance), "%s rank %d", what, j)
	}
}

func searchOne(x *Index, q []float32, qb []byte, p Params) ([]Result, Stats, error) {
	if qb != nil {
		return x.SearchBinary(qb, p, nil)
	}
	return x.Search(q, p, nil)
}

// TestFAISS173Parity: with faiss-1.7.3 semantics and the exact kernel, ids
// are identical to FAISS 1.7.3's and distances bit-identical, on every
// backend, and the search statistics match FAISS's hnsw_stats.
func TestFAISS173Parity(t *testing.T) {
	runs := loadRuns(t)
	for fi, fr := range runs {
		t.Run(fr.Fixture, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, filepath.Join(fixtureDir, fr.Fixture+".faiss"), fi, len(runs), func(t *testing.T, name string, s partial.Storage, batch bool) {
				o := parityOptions(t, name, s, batch)
				x := openIndex(t, s, o)
				for ri, run := range fr.Runs {
					p := runParams(run)
					var n1, n2, n3 int
					var vcHits int64
					for qi := range fr.Queries {
						q, qb := fr.Query(qi)
						res, st, err := searchOne(x, q, qb, p)
						if err != nil {
							t.Fatalf("%s run %d query %d: %v", name, ri, qi, err)
						}
						for j := range res {
							wantD := float32(run.Dist[qi][j])
							if res[j].ID != run.IDs[qi][j] || math.Float32bits(res[j].Distance) != math.Float32bits(wantD) {
								t.Fatalf("%s run %d (k=%d ef=%v filter=%d ids) query %d rank %d: got (%d, %v), FAISS (%d, %v)\n got %v\nwant %v",
									name, ri, run.K, run.EfSearch, len(run.AllowIDs), qi, j, res[j].ID, res[j].Distance, run.IDs[qi][j], wantD, res, run.IDs[qi])
							}
						}
						if x.NTotal() > 0 {
							n1++
						}
						if st.PoolEmptied {
							n2++
						}
						n3 += st.NDisLevel0
						vcHits += st.VectorCacheHits
					}
					if o.hold.cacheBytes > 0 && x.NTotal() > 40 && len(fr.Queries) > 1 {
						if vs := x.VectorCache(); vcHits == 0 || vs.Evictions == 0 {
							t.Errorf("%s run %d: vector cache unused: %d hits, %+v", name, ri, vcHits, vs)
						}
					}
					// FAISS 1.7.3's IndexBinaryHNSW does not update hnsw_stats.
					if !fr.Binary && (n1 != run.Stats.N1 || n2 != run.Stats.N2 || n3 != run.Stats.N3) {
						t.Errorf("%s run %d: stats n1=%d n2=%d n3=%d, FAISS %+v", name, ri, n1, n2, n3, run.Stats)
					}
				}
			})
		})
	}
}

// parityOptions are the parity tests' options for the backend called name
// (see backends; "+batch-reads" when batch): faiss-1.7.3 semantics, the
// exact kernel, and per backend the ways of holding data that must not
// change results. pread with batched reads also pins every neighbor list,
// direct those of the most-linked nodes within 16 KiB.
func parityOptions(t *testing.T, name string, s partial.Storage, batch bool) Options {
	// The fixtures' vectors are under headsFirstBytes: here they take the
	// two-pass prefetch of large vectors, elsewhere the one pass.
	o := Options{Semantics: FAISS173, Kernel: Exact, BatchReads: batch, test: testHooks{headsFirst: 1}}
	switch name {
	case "pread+batch-reads":
		o.hold.allLists = true
	case "direct+batch-reads":
		o.hold.hubBytes = 16 << 10
	case "direct-uncached", "direct-uncached+batch-reads":
		// Room for ~40 vectors: searches evict, and sometimes
		// overwrite vectors they hold, so the re-read path runs.
		o.hold.hubBytes = 16 << 10
		o.hold.cacheBytes = vectorCacheFor(t, s, 40)
	}
	return o
}

func TestBadQueries(t *testing.T) {
	s, err := storage.Open(context.Background(), filepath.Join(fixtureDir, "hnsw_flat_l2.faiss"), storage.Options{Backend: "memory"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := openIndex(t, s, Options{})
	q := make([]float32, 32)
	nan := make([]float32, 32)
	nan[5] = float32(math.NaN())
	inf := make([]float32, 32)
	inf[0] = float32(math.Inf(-1))
	for _, c := range []struct {
		q   []float32
		p   Params
		msg string
	}{
		{q[:31], Params{K: 10}, "query has 31 components, index dimension is 32"},
		{nan, Params{K: 10}, "query component 5 is NaN"},
		{inf, Params{K: 10}, "query component 0 is -Inf"},
		{q, Params{K: 0}, "k=0 is out of range [1, 10000]"},
		{q, Params{K: 10001}, "k=10001 is out of range"},
		{q, Params{K: 10, EfSearch: -1}, "ef_search=-1 is out of range"},
	} {
		_, _, err := x.Search(c.q, c.p, nil)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("err = %v, want %q", err, c.msg)
		}
	}
	if _, _, err := x.SearchBinary(make([]byte, 4), Params{K: 1}, nil); err == nil {
		t.Error("binary query on a float index succeeded")
	}
}

func sameResults(t *testing.T, what string, got []Result, ids []int64, dist []float64) {
	t.Helper()
	for j := range got {
		if got[j].ID != ids[j] || math.Float32bits(got[j].Distance) != math.Float32bits(float32(dist[j])) {
			t.Fatalf("%s rank %d: got (%d, %v), FAISS (%d, %v)\n got %v\nwant %v %v", what, j, got[j].ID, got[j].Distance, ids[j], dist[j], got, ids, dist)
		}
	}
}

// sameUpToTies compares with FAISS's brute force (IndexFlat/SQ search),
// whose heaps order equal inner-product scores larger id first: distances
// must match bit for bit at every rank, and ids as sets within each group of
// equal distances; the last group may keep different members of a tie that
// straddles k.
func sameUpToTies(t *testing.T, what string, got []Result, ids []int64, dist []float64) {
	t.Helper()
	for j := 0; j < len(got); {
		e := j
		for e < len(got) && float32(dist[e]) == float32(dist[j]) {
			e++
		}
		want := map[int64]bool{}
		for i := j; i < e; i++ {
			if math.Float32bits(got[i].Distance) != math.Float32bits(float32(dist[i])) {
				t.Fatalf("%s rank %d: distance %v, FAISS %v\n got %v\nwant %v %v", what, i, got[i].Distance, dist[i], got, ids, dist)
			}
			want[ids[i]] = true
		}
		for i := j; i < e && e < len(got); i++ {
			if !want[got[i].ID] {
				t.Fatalf("%s rank %d: id %d not among FAISS's ids at distance %v\n got %v\nwant %v %v", what, i, got[i].ID, dist[i], got, ids, dist)
			}
		}
		j = e
	}
}

// TestModernSemantics checks faiss-modern against FAISS where FAISS's
// answers say what modern FAISS returns:
//   - filters small enough for the exact scan return FAISS's brute force
//     over the allowed ids (IndexFlat/IndexScalarQuantizer with an
//     IDSelector), and so does every filter with ExactFilterMax raised;
//   - graph searches equal FAISS 1.7.3's wherever the two behaviours
//     coincide: the same pool capacity and no eviction of a popped top in
//     the 1.7.3 run. The other queries are counted: they must exist (the
//     quirk matters) but are not compared.
func TestModernSemantics(t *testing.T) {
	compared, diverged := 0, 0
	for _, fr := range loadRuns(t) {
		s, err := storage.Open(context.Background(), filepath.Join(fixtureDir, fr.Fixture+".faiss"), storage.Options{Backend: "mmap"})
		if err != nil {
			t.Fatal(err)
		}
		old := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Exact})
		mod := openIndex(t, s, Options{Semantics: Modern, Kernel: Exact})
		allExact := openIndex(t, s, Options{Semantics: Modern, Kernel: Exact, ExactFilterMax: 1 << 30})
		for ri, run := range fr.Runs {
			p := runParams(run)
			for qi := range fr.Queries {
				q, qb := fr.Query(qi)
				what := fmt.Sprintf("%s run %d query %d", fr.Fixture, ri, qi)
				if run.Exact != nil {
					res, st, err := searchOne(allExact, q, qb, p)
					if err != nil || !st.ExactScan {
						t.Fatalf("%s: exact scan: %v %+v", what, err, st)
					}
					sameUpToTies(t, what+" (exact scan)", res, run.Exact.IDs[qi], run.Exact.Dist[qi])
				}
				res, st, err := searchOne(mod, q, qb, p)
				if err != nil {
					t.Fatal(err)
				}
				if st.ExactScan {
					sameUpToTies(t, what+" (small filter)", res, run.Exact.IDs[qi], run.Exact.Dist[qi])
					continue
				}
				_, ost, err := searchOne(old, q, qb, p)
				if err != nil {
					t.Fatal(err)
				}
				if ost.poppedEvictions > 0 || ost.PoolCapacity != st.PoolCapacity {
					diverged++
					continue
				}
				compared++
				sameResults(t, what, res, run.IDs[qi], run.Dist[qi])
			}
		}
		s.Close()
	}
	t.Logf("modern == FAISS 1.7.3 on %d queries; %d queries hit the 1.7.3 pool quirks and were not compared", compared, diverged)
	if compared == 0 || diverged == 0 {
		t.Fatalf("compared %d, diverged %d: the test no longer exercises both cases", compared, diverged)
	}
}

// TestFastKernel: with the fast kernel, results equal FAISS's except where
// FAISS's own distances tie within 1e-6 relative (the fast kernel's last
// bits may order such ties differently), and distances agree within 1e-5.
func TestFastKernel(t *testing.T) {
	rows, tiedRows := 0, 0
	for _, fr := range loadRuns(t) {
		s, err := storage.Open(context.Background(), filepath.Join(fixtureDir, fr.Fixture+".faiss"), storage.Options{Backend: "memory"})
		if err != nil {
			t.Fatal(err)
		}
		x := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Fast})
		for ri, run := range fr.Runs {
			p := runParams(run)
			for qi := range fr.Queries {
				q, qb := fr.Query(qi)
				res, _, err := searchOne(x, q, qb, p)
				if err != nil {
					t.Fatal(err)
				}
				rows++
				ids, dist := run.IDs[qi], run.Dist[qi]
				same := true
				for j := range res {
					if res[j].ID != ids[j] {
						same = false
					}
					if w := dist[j]; math.Abs(float64(res[j].Distance)-w) > 1e-5*math.Max(1, math.Abs(w)) {
						t.Fatalf("%s run %d query %d rank %d: distance %v, FAISS %v", fr.Fixture, ri, qi, j, res[j].Distance, w)
					}
				}
				if same {
					continue
				}
				if !hasNearTie(dist, 1e-6) && !hasNearTie(distancesOf(res), 1e-6) {
					t.Fatalf("%s run %d query %d: ids differ without a near tie\n got %v\nwant %v %v", fr.Fixture, ri, qi, res, ids, dist)
				}
				tiedRows++
			}
		}
		s.Close()
	}
	t.Logf("fast kernel: %d of %d result rows differ from FAISS, all where FAISS's distances tie within 1e-6", tiedRows, rows)
}

func distancesOf(res []Result) []float64 {
	out := make([]float64, len(res))
	for i, r := range res {
		out[i] = float64(r.Distance)
	}
	return out
}

// hasNearTie reports whether two distinct finite distances of the list lie
// within rel of each other (exact ties included).
func hasNearTie(d []float64, rel float64) bool {
	for i := 1; i < len(d); i++ {
		a, b := d[i-1], d[i]
		if math.Abs(a) >= math.MaxFloat32 || math.Abs(b) >= math.MaxFloat32 {
			continue
		}
		if math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) {
			return true
		}
	}
	return false
}
