package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// stallTimeout is the request_timeout of the stall tests: short, against
// an S3 per-request timeout far longer, so only the request's own deadline
// can end a read.
const stallTimeout = 1500 * time.Millisecond

// stall makes every later ranged GET through fp wait without an answer
// until its client gives up.
func stall(fp *s3test.FaultProxy) {
	fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool {
		s3test.Stall(r, time.Hour)
		return true
	})
}

// timedCall is call with a client timeout well past what the server may
// take, returning the time to answer.
func timedCall(t *testing.T, url, path, body string) (resp, time.Duration) {
	t.Helper()
	cl := &http.Client{Timeout: stallTimeout + 10*time.Second}
	start := time.Now()
	r, err := cl.Post(url+path, "application/json", strings.NewReader(body))
	took := time.Since(start)
	require.NoError(t, err, "no answer after %v", took)
	defer r.Body.Close()
	raw, _ := io.ReadAll(r.Body)
	return resp{Status: r.StatusCode, Raw: string(raw)}, took
}

// TestS3StallAnswersAtDeadline: with the object store answering nothing
// (accepting requests and never replying) and an S3 timeout far past the
// request timeout, _search and _msearch on an index served on demand from
// S3 answer 504 search_timeout within request_timeout + 1 s: through the
// block cache alone, and with the disk cache below it.
func TestS3StallAnswersAtDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cacheDir bool
	}{{"block cache", false}, {"disk cache", true}} {
		t.Run(tc.name, func(t *testing.T) {
			fp := s3test.NewFaultProxy(t)
			env := s3Env(s3.Options{Endpoint: fp.URL, Timeout: time.Minute, MaxAttempts: 5, Backoff: 2 * time.Millisecond})
			cfg := Config{RequestTimeout: stallTimeout, Env: env}
			if tc.cacheDir {
				cfg.CacheDir = t.TempDir()
			}
			const large = "hnsw_flat_large.faiss"
			_, ts, bucket := s3Server(t, cfg, large)
			t.Cleanup(fp.Stop) // before the test server waits for its handlers
			// A cache of one block: searches keep fetching.
			r := call(t, ts, "PUT", "/indexes/s", `{"path":"s3://`+bucket+`/idx/`+large+`","mode":"memory_efficient","cache_bytes":65536}`)
			require.Equal(t, 200, r.Status, r.Raw)
			qs := loadRuns(t, "hnsw_flat_large").Queries
			require.GreaterOrEqual(t, len(qs), 3)
			stall(fp)
			gets := fp.GETs.Load()
			for i, q := range qs[:3] {
				body := `{"vector":` + vectorJSON(q) + `,"k":10,"method_parameters":{"ef_search":64}}`
				r, took := timedCall(t, ts.URL, "/indexes/s/_search", body)
				assert.Equal(t, 504, r.Status, "query %d: %s", i, r.Raw)
				assert.Contains(t, r.Raw, "search_timeout")
				assert.Less(t, took, stallTimeout+time.Second, "query %d answered after %v", i, took)
			}
			vecs := make([]string, 0, 3)
			for _, q := range qs[3:6] {
				vecs = append(vecs, vectorJSON(q))
			}
			r, took := timedCall(t, ts.URL, "/indexes/s/_msearch", `{"vectors":[`+strings.Join(vecs, ",")+`],"k":10}`)
			assert.Equal(t, 504, r.Status, r.Raw)
			assert.Contains(t, r.Raw, "search_timeout")
			assert.Less(t, took, stallTimeout+time.Second, "_msearch answered after %v", took)
			assert.Greater(t, fp.GETs.Load(), gets, "the searches asked the store nothing: the stall was not tested")
		})
	}
}

// TestShutdownWithStalledReads: a server shutting down while a search waits
// on a stalled object store (stopped as with SIGSTOP: every request,
// HEADs of the file watcher included, accepted and never answered;
// request_timeout far past the grace period) cancels it at the end of the
// grace period and stops within a second of it, without an error.
func TestShutdownWithStalledReads(t *testing.T) {
	sp := newStallProxy(t, s3test.Endpoint(t))
	env := s3Env(s3.Options{Endpoint: sp.url, Timeout: time.Minute, MaxAttempts: 5})
	const large = "hnsw_flat_large.faiss"
	bucket := s3test.Bucket(t)
	s3test.PutFile(t, bucket, "idx/"+large, fixtures+"/"+large)
	s, err := New(Config{DataRoots: []string{mustAbs(t, fixtures)}, S3Buckets: []string{bucket}, RequestTimeout: time.Minute, Env: env})
	require.NoError(t, err)
	require.NoError(t, s.Reg.Load("s", LoadSpec{Path: "s3://" + bucket + "/idx/" + large, Mode: "memory_efficient", CacheBytes: 65536}))

	const grace = time.Second
	url, shutdown := serveForShutdown(t, s, grace)

	sp.stalled.Store(true)
	answered := make(chan resp, 1)
	go func() {
		q := loadRuns(t, "hnsw_flat_large").Queries[0]
		r, err := http.Post(url+"/indexes/s/_search", "application/json", strings.NewReader(`{"vector":`+vectorJSON(q)+`,"k":10}`))
		if err != nil {
			answered <- resp{} // the connection closed without an answer
			return
		}
		raw, _ := io.ReadAll(r.Body)
		r.Body.Close()
		answered <- resp{Status: r.StatusCode, Raw: string(raw)}
	}()
	require.Eventually(t, func() bool { return sp.held.Load() > 0 }, 5*time.Second, 5*time.Millisecond, "the search never reached the store")
	time.Sleep(1500 * time.Millisecond) // the file watcher's HEAD stalls too
	shutdown()
	select {
	case r := <-answered:
		if r.Status != 0 {
			assert.Equal(t, 503, r.Status, r.Raw)
			assert.JSONEq(t, `{"error":{"type":"shutting_down","reason":"`+errShuttingDown.Reason+`"},"status":503}`, r.Raw)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled search never ended")
	}
}

// serveForShutdown serves s on a free port with the given grace period
// until shutdown, which cancels the server's context and checks that it
// stops without an error within a second of the grace period.
func serveForShutdown(t *testing.T, s *Server, grace time.Duration) (url string, shutdown func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr := freeAddr(t)
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, addr, grace) }()
	url = "http://" + addr
	require.Eventually(t, func() bool {
		r, err := http.Get(url + "/_health")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	return url, func() {
		t.Helper()
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			took := time.Since(start)
			assert.NoError(t, err)
			assert.Less(t, took, grace+time.Second, "shutdown took %v", took)
		case <-time.After(grace + 15*time.Second):
			t.Fatal("the server did not stop")
		}
	}
}

// stallProxy forwards TCP connections to an S3 server; while stalled it
// passes nothing on, in either direction, as a stopped server's kernel
// accepts connections and bytes that nobody answers.
type stallProxy struct {
	url     string
	stalled atomic.Bool
	held    atomic.Int64 // chunks held back while stalled
}

func newStallProxy(t *testing.T, endpoint string) *stallProxy {
	t.Helper()
	target := strings.TrimPrefix(endpoint, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{url: "http://" + ln.Addr().String()}
	var conns sync.Map
	t.Cleanup(func() {
		p.stalled.Store(false)
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	})
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				for p.stalled.Load() {
					p.held.Add(1)
					time.Sleep(5 * time.Millisecond)
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			conns.Store(c, nil)
			conns.Store(u, nil)
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return p
}

// freeAddr is a free port of 127.0.0.1.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// timedDo is timedCall with any method.
func timedDo(t *testing.T, url, method, path, body string) (resp, time.Duration) {
	t.Helper()
	cl := &http.Client{Timeout: time.Minute}
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	r, err := cl.Do(req)
	took := time.Since(start)
	require.NoError(t, err, "no answer after %v", took)
	defer r.Body.Close()
	raw, _ := io.ReadAll(r.Body)
	return resp{Status: r.StatusCode, Raw: string(raw)}, took
}

// asked waits until the store has been asked more than n ranged GETs.
func asked(t *testing.T, fp *s3test.FaultProxy, n int64, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return fp.GETs.Load() > n }, 10*time.Second, 5*time.Millisecond, "%s never reached the store", what)
}

// TestS3StallLoadSwitchWarmupDeadline: with the object store answering
// nothing and an S3 timeout far past switch_timeout, a load, a switch and
// a warm-up of an index at s3:// answer 504 (load_timeout,
// switch_timeout, warmup_timeout) within switch_timeout + 1 s, and the
// index keeps serving after the switch and the warm-up.
func TestS3StallLoadSwitchWarmupDeadline(t *testing.T) {
	fp := s3test.NewFaultProxy(t)
	env := s3Env(s3.Options{Endpoint: fp.URL, Timeout: time.Minute, MaxAttempts: 5, Backoff: 2 * time.Millisecond})
	const large = "hnsw_flat_large.faiss"
	_, ts, bucket := s3Server(t, Config{Limits: Limits{SwitchTimeout: stallTimeout}, Env: env}, large)
	t.Cleanup(fp.Stop)
	path := `"s3://` + bucket + `/idx/` + large + `"`
	r := call(t, ts, "PUT", "/indexes/s", `{"path":`+path+`,"mode":"memory_efficient","cache_bytes":65536}`)
	require.Equal(t, 200, r.Status, r.Raw)
	stall(fp)

	for _, c := range []struct{ method, path, body, typ string }{
		{"PUT", "/indexes/p", `{"path":` + path + `,"mode":"memory_efficient"}`, "load_timeout"},
		{"PUT", "/indexes/s/_mode", `{"mode":"full"}`, "switch_timeout"},
		{"POST", "/indexes/s/_warmup", ``, "warmup_timeout"},
	} {
		gets := fp.GETs.Load()
		r, took := timedDo(t, ts.URL, c.method, c.path, c.body)
		assert.Equal(t, 504, r.Status, "%s %s: %s", c.method, c.path, r.Raw)
		assert.Contains(t, r.Raw, `"`+c.typ+`"`, c.path)
		assert.Less(t, took, stallTimeout+time.Second, "%s %s answered after %v", c.method, c.path, took)
		assert.Greater(t, fp.GETs.Load(), gets, "%s asked the store nothing: the stall was not tested", c.path)
	}
	assert.Equal(t, 404, call(t, ts, "GET", "/indexes/p", "").Status, "a load past its deadline leaves nothing behind")
	fp.Clear()
	r = call(t, ts, "GET", "/indexes/s", "")
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Contains(t, r.Raw, `"memory_efficient"`, "the abandoned switch left the old mode serving")
}

// TestS3StoreFailsWarmupReason: a warm-up whose object store stops
// answering (every request, HEADs included) for good, its attempts used
// up before switch_timeout, answers 502 object_storage_error once, with a
// sentence naming the object as the client sent it and what happened,
// without package names or the AWS SDK's text; it does not wait as long
// again to check the object.
func TestS3StoreFailsWarmupReason(t *testing.T) {
	sp := newStallProxy(t, s3test.Endpoint(t))
	const perRequest = 2 * time.Second // 2 attempts of 1 s
	env := s3Env(s3.Options{Endpoint: sp.url, Timeout: time.Second, MaxAttempts: 2, Backoff: time.Millisecond})
	const large = "hnsw_flat_large.faiss"
	_, ts, bucket := s3Server(t, Config{Env: env}, large)
	url := "s3://" + bucket + "/idx/" + large
	r := call(t, ts, "PUT", "/indexes/s", `{"path":"`+url+`","mode":"memory_efficient","cache_bytes":65536}`)
	require.Equal(t, 200, r.Status, r.Raw)
	sp.stalled.Store(true)
	r, took := timedDo(t, ts.URL, "POST", "/indexes/s/_warmup", "")
	sp.stalled.Store(false)
	require.Equal(t, 502, r.Status, r.Raw)
	assert.JSONEq(t, `{"error":{"type":"object_storage_error","reason":"`+url+`: the object store did not answer within 1s (2 attempts)"},"status":502}`, r.Raw)
	for _, bad := range []string{"s3:", "partial:", "hnswsearch:", "operation error", "StatusCode", "context deadline"} {
		assert.NotContains(t, strings.ReplaceAll(r.Raw, url, "URL"), bad)
	}
	assert.Less(t, took, perRequest+perRequest*3/4, "the warm-up answered after %v: the store was asked again", took)
}

// TestS3StallDeleteCancels: a DELETE of an index whose warm-up or switch
// waits on a stalled object store (S3 timeout and switch_timeout a minute)
// ends that work: the waiting client gets 404 index_not_found within a
// second of the DELETE; one loading it gets 409 index_deleted.
func TestS3StallDeleteCancels(t *testing.T) {
	fp := s3test.NewFaultProxy(t)
	env := s3Env(s3.Options{Endpoint: fp.URL, Timeout: time.Minute, MaxAttempts: 5, Backoff: 2 * time.Millisecond})
	const large = "hnsw_flat_large.faiss"
	_, ts, bucket := s3Server(t, Config{Limits: Limits{SwitchTimeout: time.Minute}, Env: env}, large)
	t.Cleanup(fp.Stop)
	path := `"s3://` + bucket + `/idx/` + large + `"`
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/_warmup", ``},
		{"PUT", "/_mode", `{"mode":"full"}`},
		{"PUT", "", `{"path":` + path + `,"mode":"memory_efficient"}`},
	} {
		fp.Clear()
		name := "s" + strings.Trim(c.path, "/_")
		if c.path != "" {
			r := call(t, ts, "PUT", "/indexes/"+name, `{"path":`+path+`,"mode":"memory_efficient","cache_bytes":65536}`)
			require.Equal(t, 200, r.Status, r.Raw)
		}
		stall(fp)
		gets := fp.GETs.Load()
		type answer struct {
			r  resp
			at time.Time
		}
		done := make(chan answer, 1)
		go func() {
			r, _ := timedDo(t, ts.URL, c.method, "/indexes/"+name+c.path, c.body)
			done <- answer{r, time.Now()}
		}()
		asked(t, fp, gets, c.method+" "+c.path)
		time.Sleep(100 * time.Millisecond)
		r := call(t, ts, "DELETE", "/indexes/"+name, "")
		deleted := time.Now()
		require.Equal(t, 200, r.Status, r.Raw)
		select {
		case a := <-done:
			if c.path == "" {
				assert.Equal(t, 409, a.r.Status, a.r.Raw)
				assert.Contains(t, a.r.Raw, `"index_deleted"`)
			} else {
				assert.Equal(t, 404, a.r.Status, "%s: %s", c.path, a.r.Raw)
				assert.Contains(t, a.r.Raw, `"index_not_found"`, c.path)
			}
			assert.Less(t, a.at.Sub(deleted), time.Second, "%s %s answered %v after the DELETE", c.method, c.path, a.at.Sub(deleted))
		case <-time.After(20 * time.Second):
			t.Fatalf("%s %s: no answer 20s after the DELETE", c.method, c.path)
		}
	}
}

// TestShutdownWithStalledLoads: a server shutting down while a load, a
// switch and a warm-up wait on a stalled object store (stopped as with
// SIGSTOP; switch_timeout and the S3 timeout far past the grace period)
// cancels them at the end of the grace period, answers each 503
// shutting_down and stops within a second of it.
func TestShutdownWithStalledLoads(t *testing.T) {
	sp := newStallProxy(t, s3test.Endpoint(t))
	env := s3Env(s3.Options{Endpoint: sp.url, Timeout: time.Minute, MaxAttempts: 5})
	const large = "hnsw_flat_large.faiss"
	bucket := s3test.Bucket(t)
	s3test.PutFile(t, bucket, "idx/"+large, fixtures+"/"+large)
	s, err := New(Config{DataRoots: []string{mustAbs(t, fixtures)}, S3Buckets: []string{bucket}, RequestTimeout: time.Minute, Env: env,
		Limits: Limits{SwitchTimeout: time.Minute}})
	require.NoError(t, err)
	path := "s3://" + bucket + "/idx/" + large
	for _, n := range []string{"s", "w"} {
		require.NoError(t, s.Reg.Load(n, LoadSpec{Path: path, Mode: "memory_efficient", CacheBytes: 65536}))
	}
	const grace = time.Second
	url, shutdown := serveForShutdown(t, s, grace)

	sp.stalled.Store(true)
	calls := []struct{ method, path, body string }{
		{"PUT", "/indexes/p", `{"path":"` + path + `","mode":"memory_efficient"}`},
		{"PUT", "/indexes/s/_mode", `{"mode":"full"}`},
		{"POST", "/indexes/w/_warmup", ``},
	}
	answered := make(chan resp, len(calls))
	for _, c := range calls {
		go func() {
			req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				answered <- resp{Raw: c.path + ": " + err.Error()} // the connection closed without an answer
				return
			}
			raw, _ := io.ReadAll(r.Body)
			r.Body.Close()
			answered <- resp{Status: r.StatusCode, Raw: c.path + ": " + string(raw)}
		}()
	}
	held := sp.held.Load()
	require.Eventually(t, func() bool { return sp.held.Load() > held+10 }, 5*time.Second, 5*time.Millisecond, "nothing reached the store")
	time.Sleep(500 * time.Millisecond)
	shutdown()
	for range calls {
		select {
		case r := <-answered:
			assert.Equal(t, 503, r.Status, r.Raw)
			assert.Contains(t, r.Raw, `"shutting_down"`)
		case <-time.After(5 * time.Second):
			t.Fatal("a stalled load, switch or warm-up never ended")
		}
	}
}

// TestS3StoreFailsSwitchOnce: a switch of an index whose object store
// stopped answering (every request, HEADs included) answers 502 once the
// first request has used up its attempts (the check of the old object),
// naming the object, rather than waiting that long again for the open.
func TestS3StoreFailsSwitchOnce(t *testing.T) {
	sp := newStallProxy(t, s3test.Endpoint(t))
	const perRequest = 2 * time.Second // 2 attempts of 1 s
	env := s3Env(s3.Options{Endpoint: sp.url, Timeout: time.Second, MaxAttempts: 2, Backoff: time.Millisecond})
	const large = "hnsw_flat_large.faiss"
	_, ts, bucket := s3Server(t, Config{Limits: Limits{SwitchTimeout: time.Minute}, Env: env}, large)
	url := "s3://" + bucket + "/idx/" + large
	r := call(t, ts, "PUT", "/indexes/s", `{"path":"`+url+`","mode":"memory_efficient","cache_bytes":65536}`)
	require.Equal(t, 200, r.Status, r.Raw)
	sp.stalled.Store(true)
	r, took := timedDo(t, ts.URL, "PUT", "/indexes/s/_mode", `{"mode":"full"}`)
	sp.stalled.Store(false)
	assert.Equal(t, 502, r.Status, r.Raw)
	assert.Contains(t, r.Raw, url+": the object store did not answer within 1s (2 attempts)")
	assert.Less(t, took, perRequest+perRequest*3/4, "the switch answered after %v: the store was asked again", took)
}
