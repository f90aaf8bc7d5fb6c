package httpapi

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
)

// Tests of a server facing hostile input: slow or huge bodies, floods of
// connections, strict JSON, paths probing outside its roots, corrupt files.

// TestSlowBodyHoldsNoSlot: a client sending its body slowly holds no
// search slot, so with one slot a normal search still answers at once.
func TestSlowBodyHoldsNoSlot(t *testing.T) {
	_, ts := newTestServer(t, Config{Limits: Limits{MaxConcurrentSearches: 1, MaxQueuedSearches: 1}})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/s", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	var slow []*io.PipeWriter
	for range 4 {
		pr, pw := io.Pipe()
		slow = append(slow, pw)
		go func() {
			req, _ := http.NewRequest("POST", ts.URL+"/indexes/s/_search", pr)
			if r, err := http.DefaultClient.Do(req); err == nil {
				r.Body.Close()
			}
		}()
		_, err := pw.Write([]byte(`{"vector":[`))
		require.NoError(t, err)
	}
	t0 := time.Now()
	r := call(t, ts, "POST", "/indexes/s/_search", `{"vector":`+vectorJSON(make([]float64, 32))+`}`)
	assert.Equal(t, 200, r.Status, r.Raw)
	assert.Less(t, time.Since(t0), 2*time.Second)
	for _, pw := range slow {
		pw.CloseWithError(io.ErrUnexpectedEOF)
	}
}

// TestBudgetsInFlight: past max_work_in_flight or max_bodies_in_flight a
// search is shed with 429 and Retry-After; the budgets are given back.
func TestBudgetsInFlight(t *testing.T) {
	s, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/b", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	body := `{"vector":` + vectorJSON(make([]float64, 32)) + `}`
	for name, b := range map[string]*budget{"work": &s.workMem, "bodies": &s.bodyMem} {
		require.True(t, b.take(b.max))
		req, _ := http.NewRequest("POST", ts.URL+"/indexes/b/_search", strings.NewReader(body))
		r, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, _ := io.ReadAll(r.Body)
		r.Body.Close()
		assert.Equal(t, 429, r.StatusCode, "%s: %s", name, raw)
		assert.Equal(t, "1", r.Header.Get("Retry-After"), name)
		b.give(b.max)
		assert.Equal(t, 200, call(t, ts, "POST", "/indexes/b/_search", body).Status, name)
		assert.Zero(t, b.used.Load(), "%s: every charge is given back", name)
	}
}

// TestTimeoutAnswered: a search past request_timeout reaches the client as
// a 504, not as a connection closed by the server's write timeout.
func TestTimeoutAnswered(t *testing.T) {
	// 30 ms: the body is read well within it even on a loaded machine (a
	// shorter timeout can expire while it is read: a 408), and the
	// searches are not.
	s, err := New(Config{DataRoots: []string{mustAbs(t, fixtures)}, RequestTimeout: 30 * time.Millisecond,
		Limits: Limits{MaxRequestWork: 1 << 40, MaxWorkInFlight: 1 << 40}})
	require.NoError(t, err)
	require.NoError(t, s.Reg.Load("t", LoadSpec{Path: "hnsw_flat_large.faiss"}))
	addr := listenAndServe(t, s)
	q := "[" + strings.TrimSuffix(strings.Repeat("0,", 64), ",") + "]"
	body := `{"vectors":[` + strings.TrimSuffix(strings.Repeat(q+",", 400), ",") + `],"k":3000,"method_parameters":{"ef_search":3000}}`
	var r *http.Response
	require.Eventually(t, func() bool {
		r, err = http.Post("http://"+addr+"/indexes/t/_msearch", "application/json", strings.NewReader(body))
		return err == nil || !strings.Contains(err.Error(), "refused")
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, err, "the answer must reach the client")
	raw, _ := io.ReadAll(r.Body)
	r.Body.Close()
	assert.Equal(t, 504, r.StatusCode, string(raw))
	assert.Contains(t, string(raw), "search_timeout")
}

// listenAndServe serves s on a free port of 127.0.0.1 through its own
// ListenAndServe (connection limits, timeouts) until the test ends, and
// returns the address.
func listenAndServe(t *testing.T, s *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, addr, time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	return addr
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	require.NoError(t, err)
	return a
}

// TestStrictJSON: data after the object (even a stray } or ]) is a 400,
// and so is a null vector element; float32's largest value is a value.
func TestStrictJSON(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	v := make([]string, 32)
	for i := range v {
		v[i] = "0"
	}
	vec := "[" + strings.Join(v, ",") + "]"
	for _, c := range []struct {
		path, body, reason string
		status             int
	}{
		{"/indexes/j/_search", `{"vector":` + vec + `}}`, "data after the object", 400},
		{"/indexes/j/_search", `{"vector":` + vec + `}]]]`, "data after the object", 400},
		{"/indexes/j/_msearch", `{"vectors":[` + vec + `]}}`, "data after the object", 400},
		{"/indexes/j/_search", `{"vector":[null` + strings.Repeat(",0", 31) + `]}`, "value 0 is null", 400},
		{"/indexes/j/_search", `{"vector":` + vec + `,"filter":{"ids":[5,null]}}`, "id 1 is null", 400},
		{"/indexes/j/_search", `{"vector":[1.8e19` + strings.Repeat(",0", 31) + `]}`, "", 200},
		// float32's largest value is a float32, but its square is not: every
		// distance would overflow (and be spelled +Inf, which is not JSON).
		{"/indexes/j/_search", `{"vector":[3.4028235e38` + strings.Repeat(",0", 31) + `]}`, "beyond float32's range", 400},
		{"/indexes/j/_search", `{"vector":[3e38,-3e38` + strings.Repeat(",0", 30) + `]}`, "beyond float32's range", 400},
		{"/indexes/j/_search", `{"vector":[3.5e38` + strings.Repeat(",0", 31) + `]}`, "not a finite float32", 400},
	} {
		r := call(t, ts, "POST", c.path, c.body)
		assert.Equal(t, c.status, r.Status, "%.80s: %s", c.body, r.Raw)
		assert.Contains(t, r.Raw, c.reason)
	}
	r := call(t, ts, "PUT", "/indexes/k", `{"path":"hnsw_flat_l2.faiss"}}`)
	assert.Equal(t, 400, r.Status, r.Raw)
	// A cosine query that is zero once in float32 has no direction.
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/cos", `{"path":"hnsw_flat_ip.faiss","space_type":"cosinesimil"}`).Status)
	r = call(t, ts, "POST", "/indexes/cos/_search", `{"vector":[1e-46`+strings.Repeat(",0", 23)+`]}`)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "zero vector")
}

// TestPathAnswersRevealNothingOutside: a dangling symlink out of the roots
// is a 403 like one to an existing outside file; an over-long path or name
// is refused without being echoed whole.
func TestPathAnswersRevealNothingOutside(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.Symlink("/nonexistent-outside/x.faiss", filepath.Join(root, "dangling_out")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(root, "existing_out")))
	require.NoError(t, os.Symlink(filepath.Join(root, "missing.faiss"), filepath.Join(root, "dangling_in")))
	_, ts := newTestServer(t, Config{DataRoots: []string{root}})
	for p, want := range map[string]int{"dangling_out": 403, "existing_out": 403, "dangling_in": 404, "missing.faiss": 404, "sub/missing.faiss": 404} {
		r := call(t, ts, "PUT", "/indexes/x", `{"path":"`+p+`"}`)
		assert.Equal(t, want, r.Status, "%s: %s", p, r.Raw)
	}
	r := call(t, ts, "PUT", "/indexes/x", `{"path":"`+strings.Repeat("a", 5000)+`"}`)
	assert.Equal(t, 400, r.Status)
	assert.Less(t, len(r.Raw), 300)
	r = call(t, ts, "PUT", "/indexes/"+strings.Repeat("n", 10000), `{"path":"x"}`)
	assert.Equal(t, 400, r.Status)
	assert.Less(t, len(r.Raw), 300)
}

// TestCorruptListAtQuery: a file whose lists off the entry point hold an
// out-of-range id loads on demand (only the entry point's lists are checked
// then) and a query that meets it answers 422 corrupt_index naming the
// file, never a 500; mode full refuses it at load.
func TestCorruptListAtQuery(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	require.NoError(t, err)
	f, err := faissfmt.Open(bytesReaderAt(src), int64(len(src)))
	require.NoError(t, err)
	h := f.Graph.HNSW
	for node := range int32(f.Graph.NTotal) {
		if node == h.EntryPoint {
			continue
		}
		begin, end := h.NeighborSlots(node, 0)
		for slot := begin; slot < end; slot++ {
			at := h.Neighbors.Offset + 4*slot
			if int32(binary.LittleEndian.Uint32(src[at:])) >= 0 {
				binary.LittleEndian.PutUint32(src[at:], 0x7fffff00)
			}
		}
	}
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "bad.faiss"), src, 0o644))
	_, ts := newTestServer(t, Config{DataRoots: []string{root}})
	assert.Equal(t, 422, call(t, ts, "PUT", "/indexes/full", `{"path":"bad.faiss","mode":"full"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/c", `{"path":"bad.faiss","backend":"pread"}`).Status)
	r := call(t, ts, "POST", "/indexes/c/_search", `{"vector":`+vectorJSON(make([]float64, 32))+`}`)
	assert.Equal(t, 422, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "corrupt_index")
	assert.Contains(t, r.Raw, "bad.faiss")
	r = call(t, ts, "POST", "/indexes/c/_msearch", `{"vectors":[`+vectorJSON(make([]float64, 32))+`]}`)
	assert.Equal(t, 200, r.Status, r.Raw)
	assert.Contains(t, r.Raw, `"status":422`)

}

// bytesReaderAt reads a byte slice.
type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestVectorLengthBounded: a vector of more than MaxVectorLen values is a
// 400 before it is parsed.
func TestVectorLengthBounded(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/v", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	r := call(t, ts, "POST", "/indexes/v/_search", `{"vector":[`+strings.Repeat("0,", MaxVectorLen)+`0]}`)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "more than 65536 values")
}

// TestProbeRoutes: HEAD answers where GET does for the probe endpoints, and
// a trailing slash is a JSON 404, not an HTML redirect.
func TestProbeRoutes(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	for _, p := range []string{"/", "/_health", "/metrics"} {
		assert.Equal(t, 200, call(t, ts, "HEAD", p, ``).Status, p)
	}
	r := call(t, ts, "GET", "/indexes/x/", ``)
	assert.Equal(t, 404, r.Status, r.Raw)
	assert.Contains(t, r.ContentType, "application/json")
}

// TestMaxConnections: past max_connections, a new connection is not served
// while every slot is busy (here: request bodies not finished), and is once
// one closes. A connection quiet for quietBeforeClose gives its slot up to
// a new one: a keep-alive connection idle between requests, or one that
// never finishes its headers (they cannot pile up beyond the limit,
// whatever their number, nor hold it for the header timeout); a busy one
// gives it up after its request (Connection: close).
func TestMaxConnections(t *testing.T) {
	s, err := New(Config{DataRoots: []string{mustAbs(t, fixtures)}, Limits: Limits{MaxConnections: 2}})
	require.NoError(t, err)
	require.NoError(t, s.Reg.Load("t", LoadSpec{Path: "hnsw_flat_l2.faiss"}))
	addr := listenAndServe(t, s)
	const req = "GET /_health HTTP/1.1\r\nHost: x\r\n\r\n"
	answer := func(c net.Conn, wait time.Duration) (string, error) {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
		b := make([]byte, 512)
		n, err := c.Read(b)
		return string(b[:n]), err
	}
	dial := func() net.Conn {
		var c net.Conn
		require.Eventually(t, func() bool { c, err = net.Dial("tcp", addr); return err == nil }, 5*time.Second, 10*time.Millisecond)
		t.Cleanup(func() { c.Close() })
		return c
	}
	served := func(c net.Conn) {
		t.Helper()
		_, err := c.Write([]byte(req))
		require.NoError(t, err)
		a, err := answer(c, 5*time.Second)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(a, "HTTP/1.1 200"), a)
	}
	closed := func(c net.Conn, why string) {
		t.Helper()
		_, err := answer(c, 2*time.Second)
		assert.ErrorIs(t, err, io.EOF, why)
	}
	body := `{"vector":` + vectorJSON(make([]float64, 32)) + `,"k":3}`
	busy := func() net.Conn { // headers read, the body's last byte not sent: a request in progress
		c := dial()
		_, err := fmt.Fprintf(c, "POST /indexes/t/_search HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)-1])
		require.NoError(t, err)
		return c
	}

	kept := dial()
	served(kept) // now idle, kept alive
	b1 := busy()
	fresh := dial()
	served(fresh) // the idle one gave its slot up
	closed(kept, "the idle keep-alive connection was closed")

	b2 := busy() // fresh, idle, gives its slot up to it
	waiter := dial()
	_, err = waiter.Write([]byte(req))
	require.NoError(t, err)
	_, err = answer(waiter, 300*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "not served while both slots are busy")
	assert.True(t, ne.Timeout())

	// b1 finishes its request while waiter waits, and sends the next at
	// once: an answer closes it (the first when its handler started after
	// fresh began to wait, and took the close then; else the second).
	_, err = b1.Write([]byte(body[len(body)-1:] + req))
	require.NoError(t, err)
	require.NoError(t, b1.SetReadDeadline(time.Now().Add(5*time.Second)))
	both, err := io.ReadAll(b1)
	require.NoError(t, err, "closed after the second answer")
	n := strings.Count(string(both), "HTTP/1.1 200")
	assert.True(t, n == 1 || n == 2, string(both))
	assert.Equal(t, 1, strings.Count(string(both), "Connection: close"), string(both))
	a, err := answer(waiter, 5*time.Second) // its request, written before, is answered
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(a, "HTTP/1.1 200"), a)
	waiter.Close()
	b2.Close()

	// Connections that send nothing, or headers that never end, hold the
	// slots; a newcomer is served within about quietBeforeClose.
	silent := dial()
	_, err = answer(silent, 50*time.Millisecond) // accepted into a slot, quiet
	require.ErrorAs(t, err, &ne)
	slow := dial()
	_, err = slow.Write([]byte("GET /_health HTTP/1.1\r\nHost: x\r\n"))
	require.NoError(t, err)
	t0 := time.Now()
	served(dial())
	assert.Less(t, time.Since(t0), 2*time.Second, "not the 10 s header timeout")
	closed(silent, "the connection that sent nothing was closed")
}

// TestMaxConnectionsBusyClients: keep-alive clients sending requests back
// to back in every slot make room for newcomers by closing after a
// response, never by having a connection closed under a request: POST
// searches (which a client does not retry) all succeed, and each newcomer
// is served.
func TestMaxConnectionsBusyClients(t *testing.T) {
	s, err := New(Config{DataRoots: []string{mustAbs(t, fixtures)}, Limits: Limits{MaxConnections: 3}})
	require.NoError(t, err)
	require.NoError(t, s.Reg.Load("t", LoadSpec{Path: "hnsw_flat_l2.faiss"}))
	addr := listenAndServe(t, s)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	body := `{"vector":` + vectorJSON(make([]float64, 32)) + `,"k":3}`
	stop := make(chan struct{})
	type tally struct{ ok, failed, closed int }
	results := make(chan tally, 3)
	for range 3 {
		go func() {
			cl := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			defer cl.CloseIdleConnections()
			var n tally
			for {
				select {
				case <-stop:
					results <- n
					return
				default:
				}
				resp, err := cl.Post("http://"+addr+"/indexes/t/_search", "application/json", strings.NewReader(body))
				if err != nil {
					n.failed++
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					n.ok++
				}
				if resp.Close {
					n.closed++
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	for i := range 5 {
		cl := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
		resp, err := cl.Get("http://" + addr + "/_health")
		require.NoError(t, err, "newcomer %d", i)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		cl.CloseIdleConnections()
	}
	close(stop)
	var all tally
	for range 3 {
		n := <-results
		all.ok, all.failed, all.closed = all.ok+n.ok, all.failed+n.failed, all.closed+n.closed
	}
	assert.Zero(t, all.failed, "%+v", all)
	assert.Positive(t, all.ok)
	assert.Positive(t, all.closed, "slots were given up after responses")
}

// TestSlowBodyCutOff: a body arriving slower than min_body_rate after its
// first second is cut off with a 408 saying so, long before the request
// timeout, and gives back its charge; a body at speed is read.
func TestSlowBodyCutOff(t *testing.T) {
	s, err := New(Config{DataRoots: []string{mustAbs(t, fixtures)}, RequestTimeout: 20 * time.Second, Limits: Limits{MinBodyRate: 100_000}})
	require.NoError(t, err)
	require.NoError(t, s.Reg.Load("t", LoadSpec{Path: "hnsw_flat_l2.faiss"}))
	addr := listenAndServe(t, s)
	var c net.Conn
	require.Eventually(t, func() bool { c, err = net.Dial("tcp", addr); return err == nil }, 5*time.Second, 10*time.Millisecond)
	defer c.Close()
	t0 := time.Now()
	_, err = c.Write([]byte("POST /indexes/t/_search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"vector\":[0."))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	raw, _ := io.ReadAll(c) // the server answers and closes
	took := time.Since(t0)
	assert.True(t, strings.HasPrefix(string(raw), "HTTP/1.1 408"), string(raw))
	assert.Contains(t, string(raw), "min_body_rate")
	assert.Less(t, took, 5*time.Second, "cut off at the rate, not at the 20 s request timeout")
	assert.Eventually(t, func() bool { return s.bodyMem.used.Load() == 0 }, time.Second, 10*time.Millisecond, "its charge is given back")

	q := "[" + strings.TrimSuffix(strings.Repeat("0.5,", 32), ",") + "]"
	r, err := http.Post("http://"+addr+"/indexes/t/_search", "application/json", strings.NewReader(`{"vector":`+q+`,"k":3}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	assert.Equal(t, 200, r.StatusCode, string(b))
}
