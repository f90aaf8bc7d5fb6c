package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
			qp, err := s.plan(h, IntParam{V: 10, Set: true}, radial{}, nil, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := s.searchOne(h, &qp, query{vec: f.Queries[0]}, nil); err != nil {
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
	s, bodies := handlerBench(b)
	defer s.Close()
	h := s.Handler()
	b.RunParallel(func(pb *testing.PB) {
		c := newHandlerClient(h, bodies)
		for pb.Next() {
			if code := c.call(); code != 200 {
				b.Fatal(code)
			}
		}
	})
}

// BenchmarkHandlerScaling alternates one and two cores (GOMAXPROCS and
// clients alike) for rounds of 300 ms each and reports the median of the
// per-round throughput ratios. Neighbours on a shared machine make a block
// of -cpu 1 runs and a later block of -cpu 2 runs drift apart; rounds side
// by side do not:
//
//	go test -run='^$' -bench=HandlerScaling -benchtime 1x ./httpapi
func BenchmarkHandlerScaling(b *testing.B) {
	s, bodies := handlerBench(b)
	defer s.Close()
	h := s.Handler()
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	rate := func(procs int) float64 {
		runtime.GOMAXPROCS(procs)
		var total atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(300 * time.Millisecond)
		for range procs {
			wg.Go(func() {
				c := newHandlerClient(h, bodies)
				n := int64(0)
				for ; time.Now().Before(stop); n++ {
					if code := c.call(); code != 200 {
						b.Error(code)
						return
					}
				}
				total.Add(n)
			})
		}
		wg.Wait()
		return float64(total.Load()) / 0.3
	}
	rate(2) // warm-up
	var ratios []float64
	for b.Loop() {
		for range 15 {
			one := rate(1)
			ratios = append(ratios, rate(2)/one)
		}
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "2core/1core")
	b.ReportMetric(ratios[0], "min-ratio")
	b.ReportMetric(ratios[len(ratios)-1], "max-ratio")
}

// handlerBench loads the bench index and makes a request body per query.
func handlerBench(b *testing.B) (*Server, [][]byte) {
	s, f := benchServer(b)
	bodies := make([][]byte, len(f.Queries))
	for i, q := range f.Queries {
		bodies[i] = []byte(fmt.Sprintf(`{"vector":%s,"k":10}`, vectorJSON(q)))
	}
	return s, bodies
}

// handlerClient calls the search handler in process. Like a server's
// connection, it reuses its request and response objects: a fresh
// httptest request and recorder per call allocated more than the handler
// itself (a 4 KiB bufio.Reader each).
type handlerClient struct {
	h      http.Handler
	bodies [][]byte
	req    *http.Request
	body   *bytes.Reader
	w      *discardWriter
	i      int
}

func newHandlerClient(h http.Handler, bodies [][]byte) *handlerClient {
	return newHandlerClientTo(h, "/indexes/b/_search", bodies)
}

// newHandlerClientTo is a handlerClient that posts to path.
func newHandlerClientTo(h http.Handler, path string, bodies [][]byte) *handlerClient {
	return &handlerClient{h: h, bodies: bodies, req: httptest.NewRequest("POST", path, nil),
		body: &bytes.Reader{}, w: &discardWriter{h: http.Header{}}}
}

// call searches the next query and returns the status.
func (c *handlerClient) call() int {
	c.body.Reset(c.bodies[c.i%len(c.bodies)])
	c.req.Body, c.req.ContentLength = io.NopCloser(c.body), int64(c.body.Len())
	clear(c.w.h)
	c.w.code = 0
	c.h.ServeHTTP(c.w, c.req)
	c.i++
	return c.w.code
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
	qp, err := s.plan(h, IntParam{V: 10, Set: true}, radial{}, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		sc := new(queryScratch)
		i := 0
		for pb.Next() {
			if _, _, err := s.searchOne(h, &qp, query{vec: f.Queries[i%len(f.Queries)]}, sc); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkMsearchOverhead is what an _msearch of 50 vectors adds to its
// searches, without the network: the handler called in process (body
// decoding, admission, one query per vector, the JSON answer) against
// searchOne over the same queries with a reused scratch, k 10. Reports
// the CPU a search takes and allocations a request (op):
//
//	go test -run='^$' -bench=MsearchOverhead -cpu 1 ./httpapi
func BenchmarkMsearchOverhead(b *testing.B) {
	const n = 50
	s, f := benchServer(b)
	defer s.Close()
	qs := make([][]float64, n)
	for i := range qs {
		qs[i] = f.Queries[i%len(f.Queries)]
	}
	var dec, enc []string
	for _, q := range qs {
		dec, enc = append(dec, vectorJSON(q)), append(enc, `"`+b64Floats(q)+`"`)
	}
	// The process's CPU time, not the wall's: neighbours on a shared
	// machine take the wall, and the handler's workers run in parallel.
	var cpu0 time.Duration
	start := func(b *testing.B) {
		b.ReportAllocs()
		cpu0 = cpuTime()
	}
	perSearch := func(b *testing.B) {
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/search")
	}
	b.Run("path=searchOne", func(b *testing.B) {
		_, l, _ := s.Reg.acquire("b")
		defer l.release()
		sc := new(queryScratch)
		start(b)
		for b.Loop() {
			qp, err := s.plan(l.h, IntParam{V: 10, Set: true}, radial{}, nil, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			for _, q := range qs {
				if _, _, err := s.searchOne(l.h, &qp, query{vec: q}, sc); err != nil {
					b.Fatal(err)
				}
			}
		}
		perSearch(b)
	})
	h := s.Handler()
	for _, c := range []struct{ name, body string }{
		{"vectors_b64", `{"vectors_b64":[` + strings.Join(enc, ",") + `],"k":10}`},
		{"vectors", `{"vectors":[` + strings.Join(dec, ",") + `],"k":10}`},
	} {
		b.Run("path=handler/body="+c.name, func(b *testing.B) {
			hc := newHandlerClientTo(h, "/indexes/b/_msearch", [][]byte{[]byte(c.body)})
			start(b)
			for b.Loop() {
				if code := hc.call(); code != 200 {
					b.Fatal(code)
				}
			}
			perSearch(b)
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
