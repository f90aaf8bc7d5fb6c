package hnswsearch

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"golang.org/x/sys/unix"
)

// BenchmarkBackendsInterleaved compares memory_efficient with full mode in
// one process: full mode (the file copied into memory, vectors on cache
// lines), mmap (warmed: 2 MiB page-cache folios), pread (a 1 GiB block
// cache, warmed) and full mode with the vectors at the file's offsets
// search one data set of bench-data/ at k 10 and ef $EF (default 16) in
// turns of 400 queries, 31 turns each. Separate processes on this shared
// machine move ±20% from run to run; turns a few milliseconds apart see the
// same neighbours. It reports the median of the per-turn speed ratios to
// full mode and logs their quartiles.
//
//	DS=fmnist EF=16 go test -run='^$' -bench=BackendsInterleaved -benchtime 1x ./hnswsearch
func BenchmarkBackendsInterleaved(b *testing.B) {
	ds, ef, path, align := benchSet(b)
	configs := []struct {
		name string
		o    partial.Options
	}{
		{"full", partial.Options{Backend: "memory", AlignOffset: align}},
		{"mmap", partial.Options{Backend: "mmap"}},
		{"pread", partial.Options{Backend: "pread", CacheBytes: 1 << 30, AlignOffset: align}},
		// Full mode with the vectors where the file has them, as a mapping
		// must: the cost of alignment alone.
		{"full-fileoffsets", partial.Options{Backend: "memory"}},
	}
	arms := make([]arm, len(configs))
	for i, c := range configs {
		arms[i] = arm{name: c.name, x: benchIndex(b, path, c.o)}
	}
	interleave(b, ds, ef, arms)
}

// BenchmarkHeadsFirst measures prefetchViewed's first pass (the line
// holding each vector's start, then the whole vectors) against one pass,
// in full mode and over mmap, interleaved as BenchmarkBackendsInterleaved
// is; ratios are to full mode with one pass. The headsfirst arms make the
// first pass whatever the vector size, so DS=clustered (128-d) shows why
// vectors under headsFirstBytes skip it.
//
//	DS=fmnist EF=16 go test -run='^$' -bench=HeadsFirst -benchtime 1x ./hnswsearch
func BenchmarkHeadsFirst(b *testing.B) {
	ds, ef, path, align := benchSet(b)
	defer func(v int64) { headsFirstBytes = v }(headsFirstBytes)
	onePass := func() { headsFirstBytes = math.MaxInt64 }
	heads := func() { headsFirstBytes = 0 }
	// Every arm searches its own memory: arms run the same queries, and
	// one sharing the previous arm's data would find it in the L3. The
	// second mapping is of a copy of the file, so of other page-cache pages.
	clone := filepath.Join(b.TempDir(), "copy.faiss")
	if err := copyFile(clone, path); err != nil {
		b.Fatal(err)
	}
	full := partial.Options{Backend: "memory", AlignOffset: align}
	mmap := partial.Options{Backend: "mmap"}
	interleave(b, ds, ef, []arm{
		{"full-onepass", benchIndex(b, path, full), onePass}, {"full-headsfirst", benchIndex(b, path, full), heads},
		{"mmap-onepass", benchIndex(b, path, mmap), onePass}, {"mmap-headsfirst", benchIndex(b, clone, mmap), heads},
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

// benchSet reads the data set ($DS, default fmnist) and ef ($EF, default
// 16) of the interleaved benchmarks, and returns the index file's path and
// its AlignOffset; it skips the benchmark when bench-data/ lacks the file.
func benchSet(b *testing.B) (ds string, ef int, path string, align int64) {
	ds = os.Getenv("DS")
	if ds == "" {
		ds = "fmnist"
	}
	ef = 16
	if v, err := strconv.Atoi(os.Getenv("EF")); err == nil {
		ef = v
	}
	path = "../bench-data/" + ds + ".faiss"
	probe, err := Probe(path, "pread")
	if err != nil {
		b.Skipf("no bench data (%v): run bench/gen_search_data.py", err)
	}
	return ds, ef, path, AlignOffset(probe)
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
		if err := a.x.Warm(1 << 30); err != nil {
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
