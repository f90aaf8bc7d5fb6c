package engine_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// benchEnv is the value of an environment variable of the S3 benchmark,
// or def.
func benchEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// BenchmarkS3Latency: an index served from the test S3 server through a
// proxy that holds every ranged GET back by a first-byte latency (S3's is
// about 20 ms), one query at a time, the disk cache cold (a new directory
// each run), b.N queries:
//
//	go test -run '^$' -bench S3Latency -benchtime 200x ./engine
//
// FAISS_SIDECAR_BENCH_INDEX and FAISS_SIDECAR_BENCH_QUERIES (.fvecs) name
// another index (default the on_disk fixture), FAISS_SIDECAR_BENCH_BUDGET
// the memory budget (default 3/10 of the file, at least 8 MiB; every mode
// here pins the lists when it fits),
// FAISS_SIDECAR_BENCH_S3_LATENCY the latency (default 20ms),
// FAISS_SIDECAR_BENCH_GUIDE_DIR a directory of on_disk guides to reuse
// (default: built in a temporary one). Sub-benchmark open reports the
// requests and bytes of an engine open of the object against the bytes
// the file format's open (faissfmt.OpenWith) reads from the local file;
// the others report p50/p99 latency, and round trips (ranged GETs
// sent while none was in flight) and GETs per query, beside the same
// mode's p50 on the local file (local-p50-ms: the local compute).
func BenchmarkS3Latency(b *testing.B) {
	index := benchEnv("FAISS_SIDECAR_BENCH_INDEX", "../testdata/ondisk/clustered_l2.faiss")
	qpath := benchEnv("FAISS_SIDECAR_BENCH_QUERIES", "../testdata/ondisk/clustered_l2.queries.fvecs")
	latency, err := time.ParseDuration(benchEnv("FAISS_SIDECAR_BENCH_S3_LATENCY", "20ms"))
	if err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(index)
	if err != nil {
		b.Fatal(err)
	}
	budget := max(fi.Size()*3/10, 8<<20)
	if v := os.Getenv("FAISS_SIDECAR_BENCH_BUDGET"); v != "" {
		if budget, err = strconv.ParseInt(v, 10, 64); err != nil {
			b.Fatal(err)
		}
	}
	qs, err := vecio.ReadFile(qpath)
	if err != nil {
		b.Fatal(err)
	}
	guides := os.Getenv("FAISS_SIDECAR_BENCH_GUIDE_DIR")
	if guides == "" {
		guides = b.TempDir()
	}
	bucket := s3test.Bucket(b)
	u := s3test.PutFile(b, bucket, filepath.Base(index), index)
	fp := s3test.NewFaultProxy(b)
	fp.Set(func(_ int64, _ http.ResponseWriter, _ *http.Request) bool {
		time.Sleep(latency)
		return false
	})
	env := &engine.Env{S3: engine.NewS3Client(engine.S3Options{Endpoint: fp.URL})}

	b.Run("open", func(b *testing.B) {
		for range b.N {
			before := s3.ReadMetrics()
			x, _, err := engine.Open(engine.Spec{Path: u, Env: env})
			if err != nil {
				b.Fatal(err)
			}
			after := s3.ReadMetrics()
			x.Close()
			f, err := os.Open(index)
			if err != nil {
				b.Fatal(err)
			}
			cr := &countingReader{r: f}
			_, err = faissfmt.OpenWith(cr, fi.Size(), faissfmt.OpenOptions{})
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(after.GETs+after.HEADs-before.GETs-before.HEADs), "requests")
			b.ReportMetric(float64(after.ReceivedBytes-before.ReceivedBytes), "bytes")
			b.ReportMetric(float64(cr.n), "local-bytes")
			b.ReportMetric(float64(after.ReceivedBytes-before.ReceivedBytes)/float64(cr.n), "bytes/local")
		}
	})
	modes := []struct {
		name string
		spec engine.Spec
		disk bool // through a disk cache (cold)
	}{
		{"memory_efficient/cache=disk", engine.Spec{MemoryBudget: budget, BatchReads: true}, true},
		{"on_disk/cache=disk", engine.Spec{Mode: engine.ModeOnDisk, MemoryBudget: budget, GuideDir: guides}, true},
		{"on_disk/cache=none", engine.Spec{Mode: engine.ModeOnDisk, MemoryBudget: budget, GuideDir: guides}, false},
	}
	for _, m := range modes {
		b.Run("mode="+m.name, func(b *testing.B) {
			local := m.spec
			local.Path = index
			lp50, _ := s3Latencies(b, local, qs, b.N, nil)
			remote := m.spec
			remote.Path, remote.Env = u, env
			if m.spec.Mode == engine.ModeOnDisk { // build the guide (or find it) outside the timing
				x, _, err := engine.Open(remote)
				if err != nil {
					b.Fatal(err)
				}
				x.Close()
			}
			if m.disk {
				remote.CacheDir = engine.NewCacheDir(b.TempDir(), 0)
			}
			gets, rounds := fp.GETs.Load(), fp.Rounds.Load()
			b.ResetTimer()
			p50, p99 := s3Latencies(b, remote, qs, b.N, func() { gets, rounds = fp.GETs.Load(), fp.Rounds.Load() })
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p99, "p99-ms")
			b.ReportMetric(lp50, "local-p50-ms")
			b.ReportMetric(float64(fp.Rounds.Load()-rounds)/n, "rounds/query")
			b.ReportMetric(float64(fp.GETs.Load()-gets)/n, "GETs/query")
		})
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReaderAt
	n int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

// s3Latencies opens spec and runs n queries one at a time (cycling
// through qs), returning the p50 and p99 in milliseconds; opened, when
// set, is called once the index is open.
func s3Latencies(b *testing.B, spec engine.Spec, qs *vecio.Matrix, n int, opened func()) (p50, p99 float64) {
	b.Helper()
	x, _, err := engine.Open(spec)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	qp, err := x.Plan(engine.Request{K: 10, EfSearch: 64, EfSearchSet: true})
	if err != nil {
		b.Fatal(err)
	}
	if opened != nil {
		opened()
	}
	vecs := make([][]float64, qs.N)
	for i := range vecs {
		for _, v := range qs.RowF32(i) {
			vecs[i] = append(vecs[i], float64(v))
		}
	}
	lat := make([]float64, n)
	for i := range n {
		t0 := time.Now()
		if _, _, err := x.Query(&qp, vecs[i%len(vecs)], nil); err != nil {
			b.Fatal(err)
		}
		lat[i] = float64(time.Since(t0).Microseconds()) / 1000
	}
	slices.Sort(lat)
	return lat[n/2], lat[min(n-1, n*99/100)]
}
