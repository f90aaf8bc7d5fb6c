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
			useS3Defaults(t, s3.Options{Endpoint: fp.URL, Timeout: time.Minute, MaxAttempts: 5, Backoff: 2 * time.Millisecond})
			cfg := Config{RequestTimeout: stallTimeout}
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
	useS3Defaults(t, s3.Options{Endpoint: sp.url, Timeout: time.Minute, MaxAttempts: 5})
	const large = "hnsw_flat_large.faiss"
	bucket := s3test.Bucket(t)
	s3test.PutFile(t, bucket, "idx/"+large, fixtures+"/"+large)
	s, err := New(Config{DataRoots: []string{mustAbs(t, fixtures)}, S3Buckets: []string{bucket}, RequestTimeout: time.Minute})
	require.NoError(t, err)
	require.NoError(t, s.Reg.Load("s", LoadSpec{Path: "s3://" + bucket + "/idx/" + large, Mode: "memory_efficient", CacheBytes: 65536}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddr(t)
	const grace = time.Second
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, addr, grace) }()
	url := "http://" + addr
	require.Eventually(t, func() bool {
		r, err := http.Get(url + "/_health")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)

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
