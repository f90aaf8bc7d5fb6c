package hnswsearch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// Tests of a memory_efficient file truncated or overwritten under the
// server: no backend may crash with SIGBUS (mmap), answer from cached
// blocks of a truncated file (pread) or with a raw "unexpected EOF"
// (direct). Every backend reading the file reports an error wrapping
// partial.ErrFileChanged, and memory (full mode) keeps answering from its
// copy.

const changeFixture = "hnsw_flat_large"

// fileChange is one way the file under an open index changes.
type fileChange struct {
	name string
	// perQuery: the per-query check (fstat of the descriptor, or the
	// lease) sees it; otherwise only CheckFile (the path) is sure to.
	perQuery bool
	apply    func(t *testing.T, path string)
}

var fileChanges = []fileChange{
	{"truncate to 0", true, func(t *testing.T, path string) {
		require.NoError(t, os.Truncate(path, 0))
	}},
	{"cp small big", true, func(t *testing.T, path string) {
		// O_TRUNC then write, as cp does: a shorter file whose first
		// bytes (the header) are the same.
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b[:len(b)/3], 0o644))
	}},
	{"same size, other bytes", true, func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		defer f.Close()
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for i := len(b) / 2; i < len(b); i++ {
			b[i] ^= 0x5a
		}
		_, err = f.WriteAt(b[len(b)/2:], int64(len(b)/2))
		require.NoError(t, err)
	}},
	{"replaced by rename", false, func(t *testing.T, path string) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		tmp := path + ".new"
		require.NoError(t, os.WriteFile(tmp, b[:len(b)/2], 0o644))
		require.NoError(t, os.Rename(tmp, path))
	}},
}

// changeBackends are the configurations under test; memory is the
// contrast (its copy never changes).
var changeBackends = []string{"memory", "mmap", "pread", "direct", "direct+cache", "zstd"}

// openChangeable copies the fixture into a temporary directory (compressed
// for zstd) and opens it with backend; it returns the copy's path.
func openChangeable(t testing.TB, backend string) (partial.Storage, string) {
	t.Helper()
	src := filepath.Join(fixtureDir, changeFixture+".faiss")
	path := filepath.Join(t.TempDir(), "idx.faiss")
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	o := storage.Options{Backend: storage.Backend(backend), CacheBytes: 16 << 20}
	switch backend {
	case "direct":
		o.CacheBytes = 0
	case "direct+cache":
		o.Backend = "direct"
	case "zstd":
		if !zstd.Supported {
			t.Skip("zstd needs cgo")
		}
		in, err := os.Open(path)
		require.NoError(t, err)
		defer in.Close()
		zpath := path + ".zst"
		out, err := os.Create(zpath)
		require.NoError(t, err)
		_, err = zstd.CompressSeekable(out, in, 4096, 3, nil)
		require.NoError(t, err)
		require.NoError(t, out.Close())
		path = zpath
	}
	s, err := storage.Open(context.Background(), path, o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, path
}

// searchAll runs four of the fixture's queries with run 1's parameters; it
// returns the first error, or nil when every answer is FAISS's.
func searchAll(t *testing.T, x *Index) error {
	t.Helper()
	fr := runsOf(t, changeFixture)
	run := fr.Runs[1]
	for qi := range min(4, len(fr.Queries)) {
		q, _ := fr.Query(qi)
		res, _, err := x.Search(q, Params{K: run.K}, nil)
		if err != nil {
			return err
		}
		sameResults(t, fmt.Sprintf("query %d", qi), res, run.IDs[qi], run.Dist[qi])
	}
	return nil
}

// withLeases runs fn with read leases on and off: the per-query check is
// then an atomic load, or an fstat.
func withLeases(t *testing.T, fn func(t *testing.T)) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("leases=%v", on), func(t *testing.T) {
			defer partial.SetFileLeases(partial.SetFileLeases(on))
			fn(t)
		})
	}
}

func TestFileChangedSearch(t *testing.T) {
	withLeases(t, func(t *testing.T) {
		leased := partial.SetFileLeases(true)
		partial.SetFileLeases(leased)
		for _, backend := range changeBackends {
			for _, ch := range fileChanges {
				for _, first := range []string{"search", "warm"} {
					if first == "warm" && !leased {
						continue // the same checks as under a lease, once it broke
					}
					t.Run(backend+"/"+ch.name+"/"+first+" first", func(t *testing.T) {
						s, path := openChangeable(t, backend)
						x := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Exact})
						require.NoError(t, x.Warm(context.Background(), 0)) // pages mapped, blocks cached: the stale-cache case
						require.NoError(t, searchAll(t, x))
						ch.apply(t, path)
						checker := s.(partial.FileChecker)
						if backend == "memory" {
							require.NoError(t, searchAll(t, x), "full mode answers from its copy")
							require.NoError(t, x.Warm(context.Background(), 0))
							require.NoError(t, checker.CheckFile(context.Background()))
							return
						}
						if !ch.perQuery {
							// The descriptor still reads the old, intact file:
							// answers are right until CheckFile looks at the path.
							err := searchAll(t, x)
							t.Logf("before CheckFile: %v", err)
							if err != nil {
								require.ErrorIs(t, err, partial.ErrFileChanged)
							}
							require.ErrorIs(t, checker.CheckFile(context.Background()), partial.ErrFileChanged)
						}
						var err1, err2 error
						if first == "warm" {
							err1, err2 = x.Warm(context.Background(), 0), searchAll(t, x)
						} else {
							err1, err2 = searchAll(t, x), x.Warm(context.Background(), 0)
						}
						require.ErrorIs(t, err1, partial.ErrFileChanged)
						require.ErrorIs(t, err2, partial.ErrFileChanged)
						assert.Contains(t, err1.Error(), path, "the error names the file")
						// Sticky: the same error every time, CheckFile included.
						assert.Equal(t, err1.Error(), searchAll(t, x).Error())
						assert.Equal(t, err1.Error(), checker.CheckFD().Error())
						assert.Equal(t, err1.Error(), checker.CheckFile(context.Background()).Error())
						t.Log(err1)
					})
				}
			}
		}
	})
}

// TestFileChangedMessage: the error says what changed.
func TestFileChangedMessage(t *testing.T) {
	s, path := openChangeable(t, "mmap")
	x := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Exact})
	size := s.Size()
	require.NoError(t, os.Truncate(path, 0))
	err := searchAll(t, x)
	require.ErrorIs(t, err, partial.ErrFileChanged)
	assert.Contains(t, err.Error(), fmt.Sprintf("file changed: %s: truncated from %d to 0 bytes", path, size))
	assert.Contains(t, err.Error(), "since it was opened")
}

// TestFileChangedSearchBatch: every query of a batch fails with the
// change, in the batch's worker goroutines, and the process lives.
func TestFileChangedSearchBatch(t *testing.T) {
	fr := runsOf(t, changeFixture)
	for _, backend := range []string{"mmap", "pread", "direct"} {
		t.Run(backend, func(t *testing.T) {
			s, path := openChangeable(t, backend)
			x := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Exact})
			var qs []Query
			for i := range 64 {
				q, _ := fr.Query(i % len(fr.Queries))
				qs = append(qs, Query{Vector: q})
			}
			p := Params{K: fr.Runs[1].K}
			for i, r := range x.SearchBatch(qs, p, 4, nil) {
				require.NoError(t, r.Err)
				sameResults(t, backend, r.Hits, fr.Runs[1].IDs[i%len(fr.Queries)], fr.Runs[1].Dist[i%len(fr.Queries)])
			}
			require.NoError(t, os.Truncate(path, 0))
			for i, r := range x.SearchBatch(qs, p, 4, nil) {
				require.ErrorIs(t, r.Err, partial.ErrFileChanged, "query %d", i)
				assert.Empty(t, r.Hits)
			}
		})
	}
}

// TestFileChangedFault: with the checks off, a search over a truncated
// mapping faults; the fault comes back as the query's error (and the
// storage is marked changed), not as SIGBUS.
func TestFileChangedFault(t *testing.T) {
	defer func(v bool) { checkFiles = v }(checkFiles)
	checkFiles = false
	s, path := openChangeable(t, "mmap")
	x := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Exact})
	require.NoError(t, searchAll(t, x))
	require.NoError(t, os.Truncate(path, 0))
	err := searchAll(t, x)
	require.ErrorIs(t, err, partial.ErrFileChanged)
	// The check found the truncation when the fault was recovered.
	assert.Contains(t, err.Error(), "to 0 bytes")
	_, err = x.ExternalID(context.Background(), 0) // no id map: nothing read
	require.NoError(t, err)
}

// TestFileChangedRace: searches run while another goroutine truncates the
// file, or overwrites it: every answer is either FAISS's (the opened
// version's) or an error wrapping ErrFileChanged, and once the change is
// complete every query fails.
func TestFileChangedRace(t *testing.T) {
	fr := runsOf(t, changeFixture)
	run := fr.Runs[1]
	withLeases(t, func(t *testing.T) {
		for _, backend := range []string{"mmap", "pread", "direct", "zstd"} {
			for _, ch := range fileChanges[:3] {
				t.Run(backend+"/"+ch.name, func(t *testing.T) {
					s, path := openChangeable(t, backend)
					x := openIndex(t, s, Options{Semantics: FAISS173, Kernel: Exact})
					var ok, failed atomic.Int64
					var changed atomic.Bool
					var wg sync.WaitGroup
					errc := make(chan error, 8)
					for g := range 4 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := 0; ; i++ {
								after := changed.Load()
								qi := (g + i) % len(fr.Queries)
								q, _ := fr.Query(qi)
								res, _, err := x.Search(q, Params{K: run.K}, nil)
								switch {
								case err != nil && !errors.Is(err, partial.ErrFileChanged):
									errc <- fmt.Errorf("query %d: %w", qi, err)
									return
								case err != nil:
									failed.Add(1)
									if after {
										return
									}
									continue
								case after:
									errc <- fmt.Errorf("query %d answered after the change completed: %v", qi, res)
									return
								}
								for j := range res {
									if res[j].ID != run.IDs[qi][j] || res[j].Distance != float32(run.Dist[qi][j]) {
										errc <- fmt.Errorf("query %d rank %d: (%d, %v), FAISS (%d, %v)", qi, j, res[j].ID, res[j].Distance, run.IDs[qi][j], run.Dist[qi][j])
										return
									}
								}
								ok.Add(1)
							}
						}()
					}
					// Change the file once searches are answering.
					for deadline := time.Now().Add(30 * time.Second); ok.Load() < 8 && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
					ch.apply(t, path)
					changed.Store(true)
					wg.Wait()
					close(errc)
					for err := range errc {
						t.Error(err)
					}
					t.Logf("%d right answers, %d ErrFileChanged", ok.Load(), failed.Load())
					assert.Positive(t, ok.Load())
					assert.Positive(t, failed.Load())
				})
			}
		}
	})
}

// TestFileCheckNoAllocations: the per-query check allocates nothing, with
// a lease or with fstat.
func TestFileCheckNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	withLeases(t, func(t *testing.T) {
		for _, backend := range []string{"mmap", "pread"} {
			s, _ := openChangeable(t, backend)
			x := openIndex(t, s, Options{})
			fr := runsOf(t, changeFixture)
			q, _ := fr.Query(0)
			dst := make([]Result, 0, 10)
			x.Search(q, Params{K: 10}, dst[:0])
			allocs := testing.AllocsPerRun(50, func() {
				_, _, err := x.Search(q, Params{K: 10}, dst[:0])
				require.NoError(t, err)
			})
			assert.Zero(t, allocs, backend)
		}
	})
}

// BenchmarkFileCheck measures the per-query file check. check/* is the
// check alone (CheckFD under a read lease: an atomic load; with leases off:
// an fstat). search/* searches the 3000 × 64 fixture (k 10, ef 16 and 64)
// on one index per arm — no check, lease, fstat — in alternating turns of
// 300 queries, 21 turns (this shared machine's speed drifts more between
// runs than the check costs), and reports each arm's median ns/query and
// its median per-turn ratio to no check.
//
//	go test -run='^$' -bench=FileCheck -benchtime 1x ./hnswsearch
func BenchmarkFileCheck(b *testing.B) {
	fr := runsOf(b, changeFixture)
	modes := []string{"none", "lease", "fstat"}
	open := func(b *testing.B, backend, mode string) (*Index, partial.FileChecker) {
		defer partial.SetFileLeases(partial.SetFileLeases(mode == "lease"))
		s, _ := openChangeable(b, backend)
		f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
		require.NoError(b, err)
		x, err := New(context.Background(), f, s, Options{})
		require.NoError(b, err)
		b.Cleanup(func() { x.Close() })
		require.NoError(b, x.Warm(context.Background(), 0))
		return x, s.(partial.FileChecker)
	}
	for _, backend := range []string{"mmap", "pread"} {
		for _, mode := range modes[1:] {
			b.Run(fmt.Sprintf("%s/check/%s", backend, mode), func(b *testing.B) {
				_, c := open(b, backend, mode)
				const n = 200000 // whatever -benchtime says
				for range b.N {
					start := time.Now()
					for range n {
						if err := c.CheckFD(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "ns/check")
				}
			})
		}
		for _, ef := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/search/ef=%d", backend, ef), func(b *testing.B) {
				defer func(v bool) { checkFiles = v }(checkFiles)
				xs := make([]*Index, len(modes))
				for i, m := range modes {
					xs[i], _ = open(b, backend, m)
				}
				const turns, perTurn = 21, 300
				ns := make([][]float64, len(modes))
				ratio := make([][]float64, len(modes))
				dst := make([]Result, 0, 10)
				for range b.N {
					for turn := range turns {
						for i, x := range xs {
							checkFiles = modes[i] != "none"
							start := time.Now()
							for j := range perTurn {
								q, _ := fr.Query((turn*perTurn + j) % len(fr.Queries))
								var err error
								if dst, _, err = x.Search(q, Params{K: 10, EfSearch: ef}, dst[:0]); err != nil {
									b.Fatal(err)
								}
							}
							ns[i] = append(ns[i], float64(time.Since(start).Nanoseconds())/perTurn)
						}
						for i := range modes {
							ratio[i] = append(ratio[i], ns[i][len(ns[i])-1]/ns[0][len(ns[0])-1])
						}
					}
				}
				for i, m := range modes {
					b.ReportMetric(median(ns[i]), "ns/query-"+m)
					if i > 0 {
						b.ReportMetric(median(ratio[i]), m+"/none")
					}
				}
			})
		}
	}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
