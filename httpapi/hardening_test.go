package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultK: a request without k gets DefaultK hits; _search and
// _msearch spell the same hits the same way (float32 distances in their
// shortest form).
func TestDefaultK(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/d", `{"path":"hnsw_flat_large.faiss"}`).Status)
	f := loadRuns(t, "hnsw_flat_large")
	for _, q := range f.Queries[:5] {
		one := call(t, ts, "POST", "/indexes/d/_search", `{"vector":`+vectorJSON(q)+`}`)
		require.Equal(t, 200, one.Status, one.Raw)
		require.Len(t, one.Body["hits"], DefaultK)
		many := call(t, ts, "POST", "/indexes/d/_msearch", `{"vectors":[`+vectorJSON(q)+`]}`)
		require.Equal(t, 200, many.Status, many.Raw)
		require.Equal(t, hitsText(t, one.Raw), hitsText(t, many.Raw), "the same hits, spelled the same")
		// The shortest float32 form: no float64 widening digits.
		assert.NotRegexp(t, `"distance":-?[0-9]+\.[0-9]{10,}`, many.Raw)
	}
}

// hitsText is the text of the first "hits" array of a response.
func hitsText(t *testing.T, raw string) string {
	t.Helper()
	m := regexp.MustCompile(`"hits":(\[[^\]]*\])`).FindStringSubmatch(raw)
	require.NotNil(t, m, raw)
	return m[1]
}

// TestShedLoad: with every search slot taken and the queue full, a search
// is answered at once with 429 and Retry-After; a queued one runs when a
// slot frees.
func TestShedLoad(t *testing.T) {
	s, ts := newTestServer(t, Config{Limits: Limits{MaxConcurrentSearches: 1, MaxQueuedSearches: 1}})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/s", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	body := `{"vector":` + vectorJSON(make([]float64, 32)) + `}`
	s.adm.slots <- struct{}{} // a search in flight
	queued := make(chan resp)
	go func() { queued <- call(t, ts, "POST", "/indexes/s/_search", body) }()
	require.Eventually(t, func() bool { return s.adm.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)
	req, _ := http.NewRequest("POST", ts.URL+"/indexes/s/_msearch", strings.NewReader(`{"vectors":[`+vectorJSON(make([]float64, 32))+`]}`))
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	r.Body.Close()
	assert.Equal(t, 429, r.StatusCode)
	assert.Equal(t, "1", r.Header.Get("Retry-After"))
	<-s.adm.slots // the search in flight ends
	q := <-queued
	assert.Equal(t, 200, q.Status, q.Raw)
	assert.Len(t, s.adm.slots, 0, "every slot is given back")
}

// TestSwitchNeverBlocks: a switch in progress answers a second switch with
// 409 and never holds up a DELETE; a switch past its deadline is abandoned
// with the old mode serving.
func TestSwitchNeverBlocks(t *testing.T) {
	abs, _ := filepath.Abs(fixtures)
	s, err := New(Config{DataRoots: []string{abs}})
	require.NoError(t, err)
	// Loaded within the default deadline (a load's reads end at it too),
	// then every switch overruns its own: set before the server starts.
	require.NoError(t, s.Reg.Load("w", LoadSpec{Path: "hnsw_flat_large.faiss", Mode: "full"}))
	s.limits.SwitchTimeout, s.Reg.limits.SwitchTimeout = time.Nanosecond, time.Nanosecond
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	r := call(t, ts, "PUT", "/indexes/w/_mode", `{"mode":"memory_efficient","verify_queries":1000}`)
	assert.Equal(t, 504, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "the old mode keeps serving")
	info := call(t, ts, "GET", "/indexes/w", ``)
	assert.Equal(t, "full", info.Body["mode"])
	assert.Equal(t, "serving", info.Body["switch_state"])

	e := s.Reg.get("w")
	e.mu.Lock() // a switch in progress
	r = call(t, ts, "PUT", "/indexes/w/_mode", `{"mode":"memory_efficient"}`)
	assert.Equal(t, 409, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "switch_in_progress")
	done := make(chan resp)
	go func() { done <- call(t, ts, "DELETE", "/indexes/w", ``) }()
	select {
	case r = <-done:
		assert.Equal(t, 200, r.Status, r.Raw)
	case <-time.After(5 * time.Second):
		t.Fatal("DELETE waited for the switch")
	}
	e.mu.Unlock()
	assert.Equal(t, 404, call(t, ts, "GET", "/indexes/w", ``).Status)
}

// TestSwitchCancelledByDelete: a DELETE during a switch's check queries
// ends the switch; the new handle is closed, nothing is served.
func TestSwitchCancelledByDelete(t *testing.T) {
	s, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/c", `{"path":"hnsw_flat_large.faiss","mode":"full"}`).Status)
	errc := make(chan error, 1)
	go func() {
		errc <- s.Reg.Switch(context.Background(), "c", SwitchSpec{Mode: "memory_efficient", VerifyQueries: ptr(1000)})
	}()
	e := s.Reg.get("c")
	require.Eventually(t, func() bool { return e.state.Load() == "switching" }, 5*time.Second, time.Microsecond)
	require.NoError(t, s.Reg.Delete("c", time.Second))
	err := <-errc
	if err != nil { // the switch may have finished first on a fast machine
		st, _ := errStatus(err)
		assert.Equal(t, 404, st, err.Error()) // deleted: said as such, not as what it caused
	}
	assert.Nil(t, e.cur.Load(), "a deleted index serves nothing")
}

func ptr[T any](v T) *T { return &v }

// TestSwitchRefusals: a switch whose check queries disagree is a 409, and
// so is one to a file that now holds another dimension.
func TestSwitchRefusals(t *testing.T) {
	root := t.TempDir()
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_large.faiss"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "x.faiss"), src, 0o644))
	_, ts := newTestServer(t, Config{DataRoots: []string{root}})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/x", `{"path":"x.faiss","mode":"full","kernel":"fast"}`).Status)
	// The exact kernel sums in another order: some distance differs.
	r := call(t, ts, "PUT", "/indexes/x/_mode", `{"kernel":"exact","verify_queries":200}`)
	assert.Equal(t, 409, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "switch_verification_failed")

	other, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss")) // d = 32, not 64
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "x.faiss.new"), other, 0o644))
	require.NoError(t, os.Rename(filepath.Join(root, "x.faiss.new"), filepath.Join(root, "x.faiss")))
	r = call(t, ts, "PUT", "/indexes/x/_mode", `{"mode":"memory_efficient"}`)
	assert.Equal(t, 409, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "index_shape_changed")
	assert.Equal(t, "full", call(t, ts, "GET", "/indexes/x", ``).Body["mode"])
}

// TestMetricsForgottenOnDelete: DELETE removes an index's series, and a
// name that is not valid UTF-8 never reaches /metrics.
func TestMetricsForgottenOnDelete(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/gone", `{"path":"hnsw_flat_l2.faiss","backend":"pread"}`).Status)
	call(t, ts, "POST", "/indexes/gone/_search", `{"vector":`+vectorJSON(make([]float64, 32))+`}`)
	call(t, ts, "PUT", "/indexes/gone/_mode", `{"backend":"mmap"}`)
	require.Contains(t, call(t, ts, "GET", "/metrics", ``).Raw, `index="gone"`)
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/gone", ``).Status)
	assert.Equal(t, 400, call(t, ts, "PUT", "/indexes/%ff%fe", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	m := call(t, ts, "GET", "/metrics", ``)
	assert.Equal(t, 200, m.Status, m.Raw)
	assert.NotContains(t, m.Raw, `index="gone"`)
}

// TestPprofBehindToken: with a token every /debug/pprof path needs it, and
// every pprof endpoint answers.
func TestPprofBehindToken(t *testing.T) {
	_, ts := newTestServer(t, Config{Token: "tok", Pprof: true})
	paths := []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/heap", "/debug/pprof/cmdline",
		"/debug/pprof/symbol", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=0.05", "/debug/pprof/allocs"}
	for _, p := range paths {
		assert.Equal(t, 401, call(t, ts, "GET", p, ``).Status, p)
		assert.Equal(t, 401, call(t, ts, "GET", p, ``, "Authorization", "Bearer tok2").Status, p)
	}
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Go(func() {
			r := call(t, ts, "GET", p, ``, "Authorization", "Bearer tok")
			assert.Equal(t, 200, r.Status, fmt.Sprintf("%s: %.200s", p, r.Raw))
		})
	}
	wg.Wait()
	for _, m := range []string{"PUT", "DELETE", "PATCH"} { // pprof reads; it answers GET, HEAD and POST
		assert.Equal(t, 405, call(t, ts, m, "/debug/pprof/heap", ``, "Authorization", "Bearer tok").Status, m)
	}
}

// TestVersion: GET / and /_health name the build.
func TestVersion(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	r := call(t, ts, "GET", "/", ``)
	require.Equal(t, 200, r.Status)
	assert.Contains(t, r.Body["version"], "faiss-sidecar")
	assert.Contains(t, call(t, ts, "GET", "/_health", ``).Body["version"], "faiss-sidecar")
}

// TestIndexEfSearchREST: "ef_search" in the load and _mode bodies serves
// the index as FAISS 1.7.3 with index.hnsw.efSearch set
// (idmap_hnsw.index_ef.json: FAISS's own results).
func TestIndexEfSearchREST(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtures, "idmap_hnsw.index_ef.json"))
	require.NoError(t, err)
	var fx struct {
		Queries [][]float64 `json:"queries"`
		Runs    []struct {
			IndexEf  int         `json:"index_ef_search"`
			K        int         `json:"k"`
			EfSearch *int        `json:"ef_search"`
			AllowIDs []int64     `json:"allow_ids"`
			IDs      [][]int64   `json:"ids"`
			Dist     [][]float64 `json:"distances"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(raw, &fx))
	_, ts := newTestServer(t, Config{})
	loaded, checked := 0, 0
	for _, run := range fx.Runs {
		switch loaded {
		case 0:
			r := call(t, ts, "PUT", "/indexes/ef", fmt.Sprintf(`{"path":"idmap_hnsw.faiss","mode":"full","semantics":"faiss-1.7.3","kernel":"exact","ef_search":%d}`, run.IndexEf))
			require.Equal(t, 200, r.Status, r.Raw)
		case run.IndexEf:
		default:
			r := call(t, ts, "PUT", "/indexes/ef/_mode", fmt.Sprintf(`{"ef_search":%d}`, run.IndexEf))
			require.Equal(t, 200, r.Status, r.Raw)
		}
		loaded = run.IndexEf
		require.Equal(t, float64(run.IndexEf), call(t, ts, "GET", "/indexes/ef", ``).Body["ef_search"])
		for qi, q := range fx.Queries {
			r := call(t, ts, "POST", "/indexes/ef/_search", searchBody(q, run.K, run.EfSearch, run.AllowIDs)+`}`)
			require.Equal(t, 200, r.Status, r.Raw)
			hits := r.Body["hits"].([]any)
			j := 0
			for rank, id := range run.IDs[qi] {
				if id < 0 {
					continue
				}
				h := hits[j].(map[string]any)
				require.Equal(t, float64(id), h["id"], "index ef %d k %d query %d rank %d", run.IndexEf, run.K, qi, rank)
				require.Equal(t, float32(run.Dist[qi][rank]), float32(h["distance"].(float64)))
				j++
			}
			require.Len(t, hits, j)
			checked++
		}
	}
	require.Greater(t, checked, 100)
	r := call(t, ts, "PUT", "/indexes/ef/_mode", `{"ef_search":-1}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, r.Body["ef_search_stored"], r.Body["ef_search"])
	assert.Equal(t, 400, call(t, ts, "PUT", "/indexes/ef/_mode", `{"ef_search":-5}`).Status)
	assert.Equal(t, 400, call(t, ts, "PUT", "/indexes/bad", `{"path":"idmap_hnsw.faiss","ef_search":100001}`).Status)
}

// TestChecksumAtLoad: an OpenSearch file whose Lucene footer CRC does not
// match is refused (422) by mode full and by verify_checksum, and served
// on demand without it.
func TestChecksumAtLoad(t *testing.T) {
	root := t.TempDir()
	src, err := os.ReadFile(filepath.Join(fixtures, "opensearch_0_165_vec.faiss"))
	require.NoError(t, err)
	src[len(src)-1] ^= 0xff // the stored CRC's last byte
	require.NoError(t, os.WriteFile(filepath.Join(root, "bad.faiss"), src, 0o644))
	_, ts := newTestServer(t, Config{DataRoots: []string{root}})
	r := call(t, ts, "PUT", "/indexes/a", `{"path":"bad.faiss","mode":"full"}`)
	assert.Equal(t, 422, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "CRC")
	r = call(t, ts, "PUT", "/indexes/b", `{"path":"bad.faiss","verify_checksum":true}`)
	assert.Equal(t, 422, r.Status, r.Raw)
	r = call(t, ts, "PUT", "/indexes/c", `{"path":"bad.faiss"}`)
	assert.Equal(t, 200, r.Status, r.Raw)
}

// TestSearchTimeout: a search that outlives the request timeout stops with
// a 504, for _search and _msearch, and the index keeps serving.
func TestSearchTimeout(t *testing.T) {
	_, ts := newTestServer(t, Config{RequestTimeout: time.Nanosecond})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/t", `{"path":"hnsw_flat_large.faiss"}`).Status)
	q := vectorJSON(loadRuns(t, "hnsw_flat_large").Queries[0])
	r := call(t, ts, "POST", "/indexes/t/_search", `{"vector":`+q+`}`)
	assert.Equal(t, 504, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "search_timeout")
	r = call(t, ts, "POST", "/indexes/t/_msearch", `{"vectors":[`+q+`,`+q+`]}`)
	assert.Equal(t, 504, r.Status, r.Raw)
	assert.Equal(t, "serving", call(t, ts, "GET", "/indexes/t", ``).Body["state"])
}

// TestAdminBodyLimit: loads and switches take bodies of 64 KiB at most,
// searches up to max_body_bytes.
func TestAdminBodyLimit(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	big := strings.Repeat(" ", 70000)
	r := call(t, ts, "PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss"}`+big)
	assert.Equal(t, 413, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "exceeds 65536 bytes")
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	assert.Equal(t, 413, call(t, ts, "PUT", "/indexes/j/_mode", `{}`+big).Status)
	r = call(t, ts, "POST", "/indexes/j/_search", `{"vector":`+vectorJSON(make([]float64, 32))+`}`+big)
	assert.Equal(t, 200, r.Status, r.Raw)
}

// TestHeavyLane: heavy searches (a query's work ≥ heavy_query_work) run in
// a lane of their own. With the lane and its queue full, a heavy search is
// shed with 429 and Retry-After, while a cheap search on the same index is
// answered at once: a flood of heavy searches cannot take every slot. A
// queued heavy search runs when the lane frees, and a heavy _msearch takes
// no extra workers.
func TestHeavyLane(t *testing.T) {
	s, ts := newTestServer(t, Config{Limits: Limits{HeavyQueryWork: 1000, MaxHeavySearches: 1}})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/h", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	vec := vectorJSON(make([]float64, 32))
	cheap := `{"vector":` + vec + `,"k":10,"method_parameters":{"ef_search":64}}`
	heavy := `{"vector":` + vec + `,"k":10,"method_parameters":{"ef_search":1000}}`

	s.heavy.slots <- struct{}{} // a heavy search in flight
	queued := make(chan resp)
	go func() { queued <- call(t, ts, "POST", "/indexes/h/_search", heavy) }()
	require.Eventually(t, func() bool { return s.heavy.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)

	req, _ := http.NewRequest("POST", ts.URL+"/indexes/h/_search", strings.NewReader(heavy))
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(r.Body)
	r.Body.Close()
	assert.Equal(t, 429, r.StatusCode, string(raw))
	assert.Contains(t, string(raw), "max_heavy_searches")
	assert.Equal(t, "1", r.Header.Get("Retry-After"))

	for range 5 {
		c := call(t, ts, "POST", "/indexes/h/_search", cheap)
		require.Equal(t, 200, c.Status, "a cheap search does not wait for the heavy lane: %s", c.Raw)
	}
	// A radial query's cap (10000 by default) bounds its hits, not its
	// walk: at a small ef_search it is cheap; at a large one, heavy.
	radial := call(t, ts, "POST", "/indexes/h/_search", `{"vector":`+vec+`,"max_distance":1e6,"method_parameters":{"ef_search":64}}`)
	require.Equal(t, 200, radial.Status, radial.Raw)
	radial = call(t, ts, "POST", "/indexes/h/_search", `{"vector":`+vec+`,"max_distance":1e6,"method_parameters":{"ef_search":1000}}`)
	assert.Equal(t, 429, radial.Status, radial.Raw)
	<-s.heavy.slots // the heavy search in flight ends
	q := <-queued
	assert.Equal(t, 200, q.Status, q.Raw)

	many := `{"vectors":[` + vec + `,` + vec + `,` + vec + `],"k":10,"method_parameters":{"ef_search":1000}}`
	m := call(t, ts, "POST", "/indexes/h/_msearch", many)
	require.Equal(t, 200, m.Status, m.Raw)
	assert.Len(t, s.heavy.slots, 0, "the lane is given back")
	assert.Len(t, s.adm.slots, 0, "every slot is given back")
	assert.Zero(t, s.workMem.used.Load(), "every charge is given back")
}

// TestOversizeBodyAnsweredAtOnce: a client that announces a body over the
// limit, or one to a route that takes none, and waits for the answer
// before sending it gets the answer at once (413 for the former), not when
// the server gives up reading the body it will never use.
func TestOversizeBodyAnsweredAtOnce(t *testing.T) {
	_, ts := newTestServer(t, Config{MaxBodyBytes: 1 << 20})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/i", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	for _, tc := range []struct {
		method, path string
		n, status    int
	}{
		{"PUT", "/indexes/j", 100000, 413},           // admin route: 64 KiB
		{"POST", "/indexes/j/_search", 2 << 20, 413}, // search route: max_body_bytes
		{"PUT", "/indexes/j/_mode", 100000, 413},
		{"POST", "/indexes/i/_warmup", 1e12, 413}, // takes no body: 64 KiB too
		{"GET", "/indexes/i", 100, 200},           // takes no body: answered without it
		{"GET", "/_health", 300000, 413},
		{"DELETE", "/indexes/nosuch", 10, 404},
		{"GET", "/no/such/route", 10, 404},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		require.NoError(t, err)
		defer conn.Close() // a failed check must not leave the server reading
		_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", tc.method, tc.path, tc.n)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "%s %s: no answer within 5 s", tc.method, tc.path)
		assert.Equal(t, tc.status, resp.StatusCode, tc.path)
		assert.True(t, resp.Close, "%s: the connection is closed after the answer", tc.path)
		resp.Body.Close()
	}
}

// TestSlowBodiesChargeWhatArrived: connections that announce a body and
// send one byte of it are charged about that, not a whole read chunk
// each, so a few hundred of them do not take max_bodies_in_flight from
// everyone else; once the bodies in flight do fill it, a request is shed
// with 429 at once, and served again when they go.
func TestSlowBodiesChargeWhatArrived(t *testing.T) {
	s, ts := newTestServer(t, Config{Limits: Limits{MaxBodiesInFlight: 1 << 20}})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/i", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	q := `{"vector":` + vectorJSON(make([]float64, 32)) + `}`
	addr := strings.TrimPrefix(ts.URL, "http://")
	slow := func(n int, announced int) []net.Conn {
		var conns []net.Conn
		for range n {
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close() })
			_, err = fmt.Fprintf(conn, "POST /indexes/i/_search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", announced)
			require.NoError(t, err)
			conns = append(conns, conn)
		}
		return conns
	}
	// 300 × (100 + 1) bytes, and 100 × 4 KiB (a first step) of 1 MiB.
	small := slow(300, 100)
	large := slow(100, 1<<20)
	time.Sleep(200 * time.Millisecond) // let the server read what was sent
	r := call(t, ts, "POST", "/indexes/i/_search", q)
	assert.Equal(t, 200, r.Status, "400 slow bodies hold about 430 KiB of 1 MiB: %s", r.Raw)
	// A client that waits for "100 Continue" with a body larger than the
	// room left is shed before it sends, not after the go-ahead, midway.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /indexes/i/_search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", 900<<10)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	assert.Equal(t, 429, resp.StatusCode, "no 100 Continue first: %d bytes of %d held", s.bodyMem.used.Load(), s.bodyMem.max)
	resp.Body.Close()
	// 200 more large ones fill it: shed at once, served again after.
	more := slow(200, 1<<20)
	require.Eventually(t, func() bool { return s.bodyMem.used.Load() > int64(1<<20-firstBodyStep) }, 5*time.Second, 10*time.Millisecond,
		"the slow bodies fill the budget")
	r = call(t, ts, "POST", "/indexes/i/_search", q+strings.Repeat(" ", 2*firstBodyStep))
	assert.Equal(t, 429, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "request bodies")
	for _, c := range append(append(small, large...), more...) {
		c.Close()
	}
	require.Eventually(t, func() bool { return call(t, ts, "POST", "/indexes/i/_search", q).Status == 200 },
		5*time.Second, 20*time.Millisecond, "served again once the slow clients left")
}
