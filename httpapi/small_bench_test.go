//go:build unix

package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkLoadSmall is PUT /indexes/NAME of small OpenSearch-style segments
// (1,000 × 128, memory_efficient) through the whole handler in process: the
// server's own time per load, without a network or a process start. Each
// iteration loads another name and keeps it, as a node fills with segments,
// so -benchtime 10000x ends with 10,000 served. It reports the median and
// the 99th percentile load, the Go heap each index holds after a collection
// (heap-B/index) and what of it the index counts as its small arrays
// (resident-B/index), and the process's CPU time per load (cpu-ms/load:
// what a load costs on a machine whose cores others share). Generate the
// segments with
//
//	/usr/bin/python3 bench/gen_small_segments.py --n 1000
//
// and run: go test -run='^$' -bench=LoadSmall -benchtime 10000x ./httpapi
func BenchmarkLoadSmall(b *testing.B) {
	dir, _ := filepath.Abs("../bench-data/segments")
	files, _ := filepath.Glob(filepath.Join(dir, "seg_*.faiss"))
	if len(files) == 0 {
		b.Skip("no segments in bench-data/segments; see the benchmark's comment")
	}
	slices.Sort(files)
	files = files[:min(len(files), 1000)]
	s, err := New(Config{DataRoots: []string{dir}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	bodies := make([]string, len(files))
	for i, f := range files {
		bodies[i] = fmt.Sprintf(`{"path":%q,"mode":"memory_efficient"}`, filepath.Base(f))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var lat []time.Duration
	n := 0
	cpu0 := cpuTime()
	for b.Loop() {
		req := httptest.NewRequest("PUT", fmt.Sprintf("/indexes/s%05d", n), strings.NewReader(bodies[n%len(bodies)]))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		lat = append(lat, time.Since(t0))
		if w.Code != http.StatusOK {
			b.Fatalf("load %d: %d %s", n, w.Code, w.Body)
		}
		n++
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.GC()
	runtime.ReadMemStats(&after)
	var resident int64
	for _, e := range s.Reg.all() {
		resident += e.cur.Load().resident.Load()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50-ms/load")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1e3, "p99-ms/load")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(n), "cpu-ms/load")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "heap-B/index")
	b.ReportMetric(float64(resident)/float64(n), "resident-B/index")
	b.ReportMetric(float64(n), "indexes")
}
