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
		_, l, _ := s.Reg.acquire("b")
		defer l.release()
		h := l.h
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			req := SearchRequest{Vector: f.Queries[0], K: 10}
			if _, _, err := s.searchOne(h, &req, nil); err != nil {
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
		// Like a server's connection, each client reuses its request and
		// response objects: a fresh httptest request and recorder per call
		// allocated more than the handler itself (a 4 KiB bufio.Reader each).
		req := httptest.NewRequest("POST", "/indexes/b/_search", nil)
		body := &bytes.Reader{}
		w := &discardWriter{h: http.Header{}}
		i := 0
		for pb.Next() {
			body.Reset(bodies[i%len(bodies)])
			req.Body, req.ContentLength = io.NopCloser(body), int64(body.Len())
			clear(w.h)
			w.code = 0
			h.ServeHTTP(w, req)
			if w.code != 200 {
				b.Fatal(w.code)
			}
			i++
		}
	})
}

// discardWriter is a reusable http.ResponseWriter that keeps the status.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(200)
	return len(p), nil
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

// BenchmarkSearchOneParallel is BenchmarkHandlerParallel without HTTP: the
// same queries through searchOne, to tell the handler's scaling from the
// search's own (-cpu 1,2).
func BenchmarkSearchOneParallel(b *testing.B) {
	s, f := benchServer(b)
	defer s.Close()
	_, l, _ := s.Reg.acquire("b")
	defer l.release()
	h := l.h
	b.RunParallel(func(pb *testing.PB) {
		sc := new(queryScratch)
		i := 0
		for pb.Next() {
			req := SearchRequest{Vector: f.Queries[i%len(f.Queries)], K: 10}
			if _, _, err := s.searchOne(h, &req, sc); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
