package hnswsearch

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// BenchmarkBackendsInterleaved compares memory_efficient with full mode in
// one process: full mode (the file copied into memory, vectors on cache
// lines), mmap (warmed: 2 MiB page-cache folios), pread (a 1 GiB block
// cache, warmed) and full mode with the vectors at the file's offsets
// search each data set of bench-data/ at k 10 and ef 16, 64 and 256 in
// turns of 400 queries, 31 turns each. Separate processes on this shared
// machine move ±20% from run to run; turns a few milliseconds apart see the
// same neighbours. It reports the median of the per-turn speed ratios to
// full mode and logs their quartiles.
//
//	go test -run='^$' -bench='BackendsInterleaved/ds=fmnist/ef=16' -benchtime 1x ./hnswsearch
func BenchmarkBackendsInterleaved(b *testing.B) {
	forEachSet(b, backendsInterleaved)
}

func backendsInterleaved(b *testing.B, ds string, ef int, path string, align int64) {
	configs := []struct {
		name string
		o    storage.Options
	}{
		{"full", storage.Options{Backend: "memory", AlignOffset: align}},
		{"mmap", storage.Options{Backend: "mmap"}},
		{"pread", storage.Options{Backend: "pread", CacheBytes: 1 << 30, AlignOffset: align}},
		// Full mode with the vectors where the file has them, as a mapping
		// must: the cost of alignment alone.
		{"full-fileoffsets", storage.Options{Backend: "memory"}},
	}
	arms := make([]arm, len(configs))
	for i, c := range configs {
		arms[i] = arm{name: c.name, x: benchIndex(b, path, c.o)}
	}
	interleave(b, ds, ef, arms)
}

// BenchmarkHeadsFirst measures memVectors.prefetchAll's first pass (the line
// holding each vector's start, then the whole vectors) against one pass,
// in full mode and over mmap, interleaved as BenchmarkBackendsInterleaved
// is; ratios are to full mode with one pass. The headsfirst arms make the
// first pass whatever the vector size, so ds=clustered (128-d) shows why
// vectors under headsFirstBytes skip it.
//
//	go test -run='^$' -bench='HeadsFirst/ds=fmnist/ef=16' -benchtime 1x ./hnswsearch
func BenchmarkHeadsFirst(b *testing.B) {
	forEachSet(b, headsFirst)
}

func headsFirst(b *testing.B, ds string, ef int, path string, align int64) {
	onePass := Options{test: testHooks{headsFirst: -1}}
	heads := Options{test: testHooks{headsFirst: 1}}
	// Every arm searches its own memory: arms run the same queries, and
	// one sharing the previous arm's data would find it in the L3. The
	// second mapping is of a copy of the file, so of other page-cache pages.
	clone := filepath.Join(b.TempDir(), "copy.faiss")
	if err := copyFile(clone, path); err != nil {
		b.Fatal(err)
	}
	full := storage.Options{Backend: "memory", AlignOffset: align}
	mmap := storage.Options{Backend: "mmap"}
	interleave(b, ds, ef, []arm{
		{"full-onepass", benchIndexWith(b, path, full, onePass), nil}, {"full-headsfirst", benchIndexWith(b, path, full, heads), nil},
		{"mmap-onepass", benchIndexWith(b, path, mmap, onePass), nil}, {"mmap-headsfirst", benchIndexWith(b, clone, mmap, heads), nil},
	})
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if err == nil {
		// Out of the page cache, so the warm-up reads it back on 2 MiB
		// pages as it does the original (written pages are small ones).
		err = unix.Fadvise(int(out.Fd()), 0, 0, unix.FADV_DONTNEED)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// benchEfs are the efSearch values the bench-data benchmarks run at.
var benchEfs = []int{16, 64, 256}

// benchDataSets returns the data sets of bench-data/ (NAME.faiss with
// NAME.queries.fvecs, made by bench/gen_search_data.py); it skips the
// benchmark when there are none.
func benchDataSets(b *testing.B) []string {
	b.Helper()
	queries, _ := filepath.Glob("../bench-data/*.queries.fvecs")
	var out []string
	for _, q := range queries {
		ds := strings.TrimSuffix(filepath.Base(q), ".queries.fvecs")
		if _, err := os.Stat("../bench-data/" + ds + ".faiss"); err == nil {
			out = append(out, ds)
		}
	}
	if len(out) == 0 {
		b.Skip("no bench data: run bench/gen_search_data.py")
	}
	return out
}

// forEachSet runs fn as the sub-benchmarks ds=NAME/ef=EF over the data sets
// of bench-data/ and benchEfs, with the index file's path and AlignOffset.
func forEachSet(b *testing.B, fn func(b *testing.B, ds string, ef int, path string, align int64)) {
	for _, ds := range benchDataSets(b) {
		b.Run("ds="+ds, func(b *testing.B) {
			path := "../bench-data/" + ds + ".faiss"
			pf := probe(b, path)
			for _, ef := range benchEfs {
				b.Run("ef="+strconv.Itoa(ef), func(b *testing.B) { fn(b, ds, ef, path, AlignOffset(pf)) })
			}
		})
	}
}

// arm is one configuration of an interleaved benchmark: an index, and what
// to set before each of its turns (or nil).
type arm struct {
	name  string
	x     *Index
	setup func()
}

// interleave warms the arms' indexes and searches them in turns of 400
// queries at k 10 and ef, 31 turns each, the arms one after another on the
// same queries (so arms should not share memory: see BenchmarkHeadsFirst). It
// reports each arm's median µs per query and the median of its per-turn
// speed ratios to arms[0], and logs their quartiles.
func interleave(b *testing.B, ds string, ef int, arms []arm) {
	for _, a := range arms {
		if err := a.x.Warm(context.Background(), 1<<30); err != nil {
			b.Fatal(err)
		}
	}
	m := benchQueries(b, ds)
	dst := make([]Result, 0, 10)
	const turn = 400
	qi := 0
	search := func(a arm) float64 {
		if a.setup != nil {
			a.setup()
		}
		start := time.Now()
		for j := range turn {
			var err error
			if dst, _, err = a.x.Search(m.RowF32((qi+j)%m.N), Params{K: 10, EfSearch: ef}, dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start).Microseconds()) / turn
	}
	for _, a := range arms { // untimed: the scratch pools and caches fill
		search(a)
	}
	us := make([][]float64, len(arms))
	for b.Loop() {
		for range 31 {
			for i, a := range arms {
				us[i] = append(us[i], search(a))
			}
			qi += turn
		}
	}
	for i, a := range arms {
		ratios := make([]float64, len(us[i]))
		for t := range ratios {
			ratios[t] = us[0][t] / us[i][t] // speed relative to arms[0]
		}
		slices.Sort(ratios)
		med := slices.Sorted(slices.Values(us[i]))[len(us[i])/2]
		b.ReportMetric(med, a.name+"-us/query")
		if i > 0 {
			b.ReportMetric(ratios[len(ratios)/2], a.name+"/"+arms[0].name)
			b.Logf("%s/%s: median %.3f, quartiles %.3f–%.3f over %d turns", a.name, arms[0].name,
				ratios[len(ratios)/2], ratios[len(ratios)/4], ratios[3*len(ratios)/4], len(ratios))
		}
	}
}
