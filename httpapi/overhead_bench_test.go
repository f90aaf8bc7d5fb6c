package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkHTTPOverhead compares one search in process with the same search
// over HTTP on loopback (keep-alive client, JSON both ways); the difference
// is what the API adds (target ≤ 100 µs at p50):
//
//	go test -run='^$' -bench=HTTPOverhead ./httpapi
func BenchmarkHTTPOverhead(b *testing.B) {
	s, f := benchServer(b)
	defer s.Close()
	body := []byte(fmt.Sprintf(`{"vector":%s,"k":10}`, vectorJSON(f.Queries[0])))
	b.Run("in-process", func(b *testing.B) {
		_, h, _ := s.Reg.acquire("b")
		defer h.release()
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			req := SearchRequest{Vector: f.Queries[0], K: 10}
			if _, _, err := s.searchOne(h, &req); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	client := &http.Client{}
	b.Run("http-loopback", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			r, err := client.Post(ts.URL+"/indexes/b/_search", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode != 200 {
				b.Fatal(r.StatusCode)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})
}

func reportP50(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
}

// BenchmarkHandlerParallel drives the whole handler (routing, JSON both
// ways, search) in process from GOMAXPROCS goroutines, so -cpu 1,2 shows how
// server throughput scales with cores without a load generator competing
// for them:
//
//	go test -run='^$' -bench=HandlerParallel -cpu 1,2 ./httpapi
func BenchmarkHandlerParallel(b *testing.B) {
	s, f := benchServer(b)
	defer s.Close()
	bodies := make([][]byte, len(f.Queries))
	for i, q := range f.Queries {
		bodies[i] = []byte(fmt.Sprintf(`{"vector":%s,"k":10}`, vectorJSON(q)))
	}
	h := s.Handler()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			req := httptest.NewRequest("POST", "/indexes/b/_search", bytes.NewReader(bodies[i%len(bodies)]))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 200 {
				b.Fatal(w.Code)
			}
			i++
		}
	})
}

// benchServer serves the 3000-vector fixture as index "b" in full mode.
func benchServer(b *testing.B) (*Server, fixtureRuns) {
	abs, _ := filepath.Abs(fixtures)
	s, err := New(Config{DataRoots: []string{abs}})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Reg.Load("b", LoadSpec{Path: "hnsw_flat_large.faiss", Mode: "full"}); err != nil {
		b.Fatal(err)
	}
	return s, loadRuns(b, "hnsw_flat_large")
}
