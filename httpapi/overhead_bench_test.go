package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
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
	body   *reusableBody
	w      *discardWriter
	i      int
}

func newHandlerClient(h http.Handler, bodies [][]byte) *handlerClient {
	return newHandlerClientTo(h, "/indexes/b/_search", bodies)
}

// newHandlerClientTo is a handlerClient that posts to path.
func newHandlerClientTo(h http.Handler, path string, bodies [][]byte) *handlerClient {
	return &handlerClient{h: h, bodies: bodies, req: httptest.NewRequest("POST", path, nil),
		body: &reusableBody{}, w: &discardWriter{h: http.Header{}}}
}

// call searches the next query and returns the status.
func (c *handlerClient) call() int {
	c.body.Reset(c.bodies[c.i%len(c.bodies)])
	c.req.Body, c.req.ContentLength = c.body, int64(c.body.Len())
	clear(c.w.h)
	c.w.code = 0
	c.h.ServeHTTP(c.w, c.req)
	c.i++
	return c.w.code
}

// reusableBody is a request body that a client resets for each call.
type reusableBody struct{ bytes.Reader }

func (*reusableBody) Close() error { return nil }

// discardWriter is a reusable http.ResponseWriter that keeps the status.
// Like a server's connection it takes read and write deadlines, so the
// handler's deadline calls cost what they cost in a server.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header { return w.h }

func (*discardWriter) SetReadDeadline(time.Time) error  { return nil }
func (*discardWriter) SetWriteDeadline(time.Time) error { return nil }

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
// decoding, admission, one query per vector, the JSON answer), with the
// vectors as vectors_b64 and as decimal JSON, against searchOne over the
// same queries with a reused scratch, k 10. Each op runs one request of
// each, in turn, and times each in the process's CPU time: neighbours on
// a shared machine take wall time, and change the CPU a search takes from
// one second to the next, so only arms interleaved this finely compare.
// Reports the CPU a search takes in each arm, their ratios to searchOne,
// and allocations a op. Data sets: the 3000 × 64 fixture (its own
// ef_search), and those of bench-data/ at ef_search 16, their queries 50
// at a time in turn:
//
//	go test -run='^$' -bench=MsearchOverhead -cpu 1 ./httpapi
func BenchmarkMsearchOverhead(b *testing.B) {
	b.Run("ds=fixture", func(b *testing.B) {
		s, f := benchServer(b)
		defer s.Close()
		msearchOverhead(b, s, f.Queries, "")
	})
	sets, _ := filepath.Glob("../bench-data/*.queries.fvecs")
	for _, qf := range sets {
		ds := strings.TrimSuffix(filepath.Base(qf), ".queries.fvecs")
		if _, err := os.Stat("../bench-data/" + ds + ".faiss"); err != nil {
			continue
		}
		b.Run("ds="+ds+"/ef=16", func(b *testing.B) {
			m, err := vecio.ReadFile(qf)
			if err != nil || m.F32 == nil {
				b.Skip("not float queries:", err)
			}
			abs, _ := filepath.Abs("../bench-data")
			s, err := New(Config{DataRoots: []string{abs}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Reg.Load("b", LoadSpec{Path: ds + ".faiss", Mode: "full"}); err != nil {
				b.Fatal(err)
			}
			qs := make([][]float64, m.N)
			for i := range qs {
				for _, x := range m.RowF32(i) {
					qs[i] = append(qs[i], float64(x))
				}
			}
			msearchOverhead(b, s, qs, `,"method_parameters":{"ef_search":16}`)
		})
	}
}

// msearchOverhead runs BenchmarkMsearchOverhead on s's index "b", with
// the _msearch bodies' parameters beyond k 10 in params.
func msearchOverhead(b *testing.B, s *Server, queries [][]float64, params string) {
	const n = 50
	var batches [][][]float64
	for i := 0; i == 0 || i+n <= len(queries); i += n {
		qs := make([][]float64, n)
		for j := range qs {
			qs[j] = queries[(i+j)%len(queries)]
		}
		batches = append(batches, qs)
	}
	_, l, _ := s.Reg.acquire("b")
	defer l.release()
	var mp *MethodParameters
	if params != "" {
		mp = &MethodParameters{EfSearch: 16}
	}
	sc := new(queryScratch)
	inProcess := func(i int) {
		qp, err := s.plan(l.h, IntParam{V: 10, Set: true}, radial{}, mp, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, q := range batches[i] {
			if _, _, err := s.searchOne(l.h, &qp, query{vec: q}, sc); err != nil {
				b.Fatal(err)
			}
		}
	}
	h := s.Handler()
	handler := func(body func(qs [][]float64) string) func(int) {
		var bodies [][]byte
		for _, qs := range batches {
			bodies = append(bodies, []byte(body(qs)))
		}
		hc := newHandlerClientTo(h, "/indexes/b/_msearch", bodies)
		return func(int) {
			if code := hc.call(); code != 200 {
				b.Fatal(code)
			}
		}
	}
	arms := []struct {
		name string
		run  func(int)
		cpu  time.Duration
	}{
		{name: "in-process", run: inProcess},
		{name: "vectors_b64", run: handler(func(qs [][]float64) string {
			var enc []string
			for _, q := range qs {
				enc = append(enc, `"`+b64Floats(q)+`"`)
			}
			return `{"vectors_b64":[` + strings.Join(enc, ",") + `],"k":10` + params + `}`
		})},
		{name: "vectors", run: handler(func(qs [][]float64) string {
			var dec []string
			for _, q := range qs {
				dec = append(dec, vectorJSON(q))
			}
			return `{"vectors":[` + strings.Join(dec, ",") + `],"k":10` + params + `}`
		})},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for a := range arms {
			t0 := cpuTime()
			arms[a].run(i % len(batches))
			arms[a].cpu += cpuTime() - t0
		}
		i++
	}
	for _, a := range arms {
		b.ReportMetric(float64(a.cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/search("+a.name+")")
		if a.name != "in-process" {
			b.ReportMetric(float64(a.cpu)/float64(arms[0].cpu), a.name+"/in-process")
		}
	}
}

// cpuTime is the CPU time the process has used, to the nanosecond.
func cpuTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}
