package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// uploader uploads each local file the conformance suite writes once and
// opens the object with open.
func uploader(t *testing.T, open func(t *testing.T, url string) partial.Storage) partialtest.Opener {
	bucket := s3test.Bucket(t)
	var mu sync.Mutex
	urls := map[string]string{}
	return func(t *testing.T, path string) partial.Storage {
		t.Helper()
		mu.Lock()
		u, ok := urls[path]
		if !ok {
			u = s3test.PutFile(t, bucket, fmt.Sprintf("obj%d/%s", len(urls), filepath.Base(path)), path)
			urls[path] = u
		}
		mu.Unlock()
		return open(t, u)
	}
}

// TestConformance: the object alone (a small head, so reads are GETs),
// with the default head, and behind a block cache.
func TestConformance(t *testing.T) {
	s3test.Endpoint(t)
	t.Run("object", func(t *testing.T) {
		partialtest.Run(t, uploader(t, func(t *testing.T, u string) partial.Storage {
			o, err := client.Open(context.Background(), u, s3.Options{HeadBytes: 1000})
			require.NoError(t, err)
			return o
		}), nil)
	})
	t.Run("object default head", func(t *testing.T) {
		partialtest.Run(t, uploader(t, func(t *testing.T, u string) partial.Storage {
			o, err := client.Open(context.Background(), u, s3.Options{})
			require.NoError(t, err)
			return o
		}), nil)
	})
	t.Run("cached", func(t *testing.T) {
		partialtest.Run(t, uploader(t, func(t *testing.T, u string) partial.Storage {
			o, err := client.Open(context.Background(), u, s3.Options{HeadBytes: 512})
			require.NoError(t, err)
			c, err := blockcache.NewCached(u, o, nil, 256<<10, 4096)
			require.NoError(t, err)
			return c
		}), nil)
	})
}

func TestParseURLAndMissing(t *testing.T) {
	for _, bad := range []string{"s3://", "s3://bucket", "s3://bucket/", "s3:///key", "/local/file"} {
		_, _, err := s3.ParseURL(bad)
		require.ErrorIs(t, err, partial.ErrBadOption, bad)
	}
	b, k, err := s3.ParseURL("s3://bkt/a/b/c.faiss")
	require.NoError(t, err)
	require.Equal(t, [2]string{"bkt", "a/b/c.faiss"}, [2]string{b, k})

	bucket := s3test.Bucket(t)
	_, err = client.Open(context.Background(), "s3://"+bucket+"/missing.faiss", s3.Options{})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "s3://"+bucket+"/missing.faiss")
}

// TestReplacedWhileOpen: an object replaced after open fails the next GET
// with ErrFileChanged (never the new bytes), stays failed, and both checks
// report it; a fresh open serves the new version.
func TestReplacedWhileOpen(t *testing.T) {
	bucket := s3test.Bucket(t)
	v1 := bytes.Repeat([]byte{1}, 300<<10)
	v2 := bytes.Repeat([]byte{2}, 300<<10)
	u := s3test.Put(t, bucket, "x.faiss", v1)
	o, err := client.Open(context.Background(), u, s3.Options{HeadBytes: 4096})
	require.NoError(t, err)
	defer o.Close()
	p := make([]byte, 1000)
	_, err = o.ReadAtContext(context.Background(), p, 100<<10, nil)
	require.NoError(t, err)
	require.Equal(t, v1[:1000], p)
	require.NoError(t, o.CheckFD())
	require.NoError(t, o.CheckFile(context.Background()))

	s3test.Put(t, bucket, "x.faiss", v2)
	clear(p)
	_, err = o.ReadAtContext(context.Background(), p, 200<<10, nil)
	require.ErrorIs(t, err, partial.ErrFileChanged)
	require.ErrorContains(t, err, u)
	require.Equal(t, make([]byte, 1000), p, "no byte of the new version")
	require.ErrorIs(t, o.CheckFD(), partial.ErrFileChanged, "sticky")
	require.ErrorIs(t, o.CheckFile(context.Background()), partial.ErrFileChanged)
	_, err = o.ReadAtContext(context.Background(), p, 0, nil) // even from the head
	require.ErrorIs(t, err, partial.ErrFileChanged)
	reqs := []partial.ReadReq{{Off: 5000, Buf: make([]byte, 10)}}
	require.ErrorIs(t, o.ReadBatch(context.Background(), reqs), partial.ErrFileChanged)

	// CheckFile alone sees a replacement, with no read in between.
	o2, err := client.Open(context.Background(), u, s3.Options{})
	require.NoError(t, err)
	defer o2.Close()
	_, err = o2.ReadAtContext(context.Background(), p, 200<<10, nil)
	require.NoError(t, err)
	require.Equal(t, v2[:1000], p)
	s3test.Put(t, bucket, "x.faiss", v1[:1000])
	require.NoError(t, o2.CheckFD(), "nothing read since: the per-query check has nothing to report")
	require.ErrorIs(t, o2.CheckFile(context.Background()), partial.ErrFileChanged)
	s3test.Delete(t, bucket, "x.faiss")
	o3, err := client.Open(context.Background(), u, s3.Options{})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Nil(t, o3)
}

// TestBatchCoalesces: adjacent and overlapping ranges go as one GET,
// separate ones as their own, and every request gets its bytes.
func TestBatchCoalesces(t *testing.T) {
	bucket := s3test.Bucket(t)
	path, data := partialtest.PatternFile(t, 1<<20)
	u := s3test.PutFile(t, bucket, "p.bin", path)
	o, err := client.Open(context.Background(), u, s3.Options{HeadBytes: 512})
	require.NoError(t, err)
	defer o.Close()
	before := o.Requests().GETs
	reqs := []partial.ReadReq{
		{Off: 8192, Buf: make([]byte, 4096)},  // group A
		{Off: 4096, Buf: make([]byte, 4096)},  // group A (adjacent, out of order)
		{Off: 10000, Buf: make([]byte, 100)},  // group A (overlapping)
		{Off: 500000, Buf: make([]byte, 100)}, // group B
		{Off: 900000, Buf: make([]byte, 7)},   // group C
		{Off: 900007, Buf: make([]byte, 0)},   // empty: nothing to read
		{Off: 100, Buf: make([]byte, 50)},     // in the head: no GET
	}
	require.NoError(t, o.ReadBatch(context.Background(), reqs))
	for _, q := range reqs {
		require.NoError(t, q.Err)
		require.Equal(t, data[q.Off:q.Off+int64(len(q.Buf))], q.Buf, "at %d", q.Off)
	}
	assert.Equal(t, int64(3), o.Requests().GETs-before, "three GETs: A, B, C")
	assert.Equal(t, int64(1), reqs[1].IO.DeviceReads, "A's GET counted in its first request's tally")
}

// TestFaults: through a proxy injecting 503 SlowDown, connection resets,
// truncated bodies and stalls past the timeout, reads retry and return the
// right bytes; a fault that never ends fails with a clear error after the
// bounded attempts, naming the object and the status and never the
// credentials.
func TestFaults(t *testing.T) {
	bucket := s3test.Bucket(t)
	path, data := partialtest.PatternFile(t, 1<<20)
	u := s3test.PutFile(t, bucket, "f.bin", path)
	fp := s3test.NewFaultProxy(t)
	opts := s3.Options{Endpoint: fp.URL, HeadBytes: 4096, Timeout: 500 * time.Millisecond, MaxAttempts: 4, Backoff: time.Millisecond}
	o, err := client.Open(context.Background(), u, opts)
	require.NoError(t, err)
	defer o.Close()
	read := func(off, n int64) error {
		p := make([]byte, n)
		if _, err := o.ReadAtContext(context.Background(), p, off, nil); err != nil {
			return err
		}
		if !bytes.Equal(p, data[off:off+n]) {
			return fmt.Errorf("wrong bytes at %d", off)
		}
		return nil
	}
	faults := map[string]func(w http.ResponseWriter, r *http.Request){
		"503 SlowDown": func(w http.ResponseWriter, _ *http.Request) { s3test.SlowDown(w) },
		"500":          func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) },
		"connection reset": func(w http.ResponseWriter, _ *http.Request) {
			s3test.Reset(w)
		},
		"truncated body":         func(w http.ResponseWriter, _ *http.Request) { s3test.Truncated(w) },
		"stall past the timeout": func(_ http.ResponseWriter, r *http.Request) { s3test.Stall(r, 3*time.Second) },
	}
	for name, f := range faults {
		t.Run(name, func(t *testing.T) {
			start := fp.GETs.Load()
			retries := o.Requests().Retries
			fp.Set(func(n int64, w http.ResponseWriter, r *http.Request) bool {
				if n-start <= 2 { // the first two tries fail
					f(w, r)
					return true
				}
				return false
			})
			require.NoError(t, read(300000+int64(len(name))*1000, 5000))
			// Go's transport may itself resend a GET whose reused
			// connection broke before any answer: one retry of ours less.
			assert.GreaterOrEqual(t, o.Requests().Retries-retries, int64(1))
			assert.LessOrEqual(t, o.Requests().Retries-retries, int64(2))
			assert.Equal(t, int64(3), fp.GETs.Load()-start)
		})
	}
	t.Run("latency", func(t *testing.T) {
		fp.Set(func(int64, http.ResponseWriter, *http.Request) bool { time.Sleep(20 * time.Millisecond); return false })
		t0 := time.Now()
		require.NoError(t, read(600000, 100))
		assert.GreaterOrEqual(t, time.Since(t0), 20*time.Millisecond)
	})
	t.Run("never recovers", func(t *testing.T) {
		start := fp.GETs.Load()
		fp.Set(func(n int64, w http.ResponseWriter, _ *http.Request) bool { s3test.SlowDown(w); return true })
		err := read(700000, 100)
		require.Error(t, err)
		assert.NotErrorIs(t, err, partial.ErrFileChanged)
		assert.Contains(t, err.Error(), u)
		assert.Contains(t, err.Error(), "after 4 attempt(s)")
		assert.Contains(t, err.Error(), "503")
		assert.Contains(t, err.Error(), "SlowDown")
		assert.Equal(t, int64(4), fp.GETs.Load()-start, "bounded attempts")
		if secret := os.Getenv("AWS_SECRET_ACCESS_KEY"); secret != "" {
			assert.NotContains(t, err.Error(), secret)
		}
		fp.Clear()
		require.NoError(t, read(700000, 100), "the object serves again once the server does")
	})
	t.Run("not retried: 403", func(t *testing.T) {
		start := fp.GETs.Load()
		fp.Set(func(n int64, w http.ResponseWriter, _ *http.Request) bool {
			w.WriteHeader(http.StatusForbidden)
			return true
		})
		err := read(800000, 100)
		require.ErrorContains(t, err, "403")
		assert.Equal(t, int64(1), fp.GETs.Load()-start)
		fp.Clear()
	})
	t.Run("parallel batch under faults", func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		fp.Set(func(n int64, w http.ResponseWriter, r *http.Request) bool {
			mu.Lock()
			seen[r.Header.Get("Range")]++
			k := seen[r.Header.Get("Range")]
			mu.Unlock()
			if k <= 2 { // every range fails twice, then succeeds
				if k == 1 {
					s3test.SlowDown(w)
				} else {
					s3test.Reset(w)
				}
				return true
			}
			return false
		})
		defer fp.Clear()
		var reqs []partial.ReadReq
		for i := range 40 {
			reqs = append(reqs, partial.ReadReq{Off: int64(i) * 20000, Buf: make([]byte, 3000)})
		}
		require.NoError(t, o.ReadBatch(context.Background(), reqs))
		for _, q := range reqs {
			require.Equal(t, data[q.Off:q.Off+3000], q.Buf)
		}
	})
}

// TestCredentialsNotInErrors: a wrong secret fails with the server's
// refusal (403), an unknown key id with its answer (versitygw: 404
// XAdminUserNotFound), naming neither the secret nor the key id.
func TestCredentialsNotInErrors(t *testing.T) {
	bucket := s3test.Bucket(t)
	u := s3test.Put(t, bucket, "c.bin", []byte("hello"))
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-5f1e2d")
	fp := s3test.NewFaultProxy(t) // another endpoint: a client loaded with these variables
	_, err := client.Open(context.Background(), u, s3.Options{Endpoint: fp.URL})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "403")
	assert.NotContains(t, err.Error(), "wrong-secret-5f1e2d")
	assert.NotContains(t, err.Error(), os.Getenv("AWS_ACCESS_KEY_ID"))

	t.Setenv("AWS_ACCESS_KEY_ID", "wrong-key-id-77aa")
	fp2 := s3test.NewFaultProxy(t)
	_, err = client.Open(context.Background(), u, s3.Options{Endpoint: fp2.URL})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "wrong-secret-5f1e2d")
	assert.NotContains(t, err.Error(), "wrong-key-id-77aa")
}

// TestOpenRequests: opening a FAISS file through the object and a block
// cache takes few requests (the target: ≤ 4); the count is what
// the server saw.
func TestOpenRequests(t *testing.T) {
	bucket := s3test.Bucket(t)
	fp := s3test.NewFaultProxy(t)
	for _, name := range []string{"hnsw_flat_l2.faiss", "hnsw_flat_large.faiss", "idmap_hnsw.faiss"} {
		u := s3test.PutFile(t, bucket, name, filepath.Join("../../testdata/fixtures", name))
		before := fp.Total.Load()
		o, err := client.Open(context.Background(), u, s3.Options{Endpoint: fp.URL})
		require.NoError(t, err)
		c, err := blockcache.NewCached(u, o, nil, 64<<20, s3.DefaultBlockSize)
		require.NoError(t, err)
		f, err := faissfmt.OpenWith(partial.ReaderAt(context.Background(), c), c.Size(), faissfmt.OpenOptions{AllowNullStorage: true})
		require.NoError(t, err)
		n := fp.Total.Load() - before
		t.Logf("%s (%d bytes): open took %d requests, %d bytes read", name, c.Size(), n, o.Stats().BytesRead)
		assert.LessOrEqual(t, n, int64(4), name)
		assert.Equal(t, n, o.Requests().GETs+o.Requests().HEADs)
		assert.Positive(t, f.Size)
		require.NoError(t, c.Close())
	}
}

// TestOpenMemory: the whole object, downloaded in parallel chunks, aligned
// as asked.
func TestOpenMemory(t *testing.T) {
	bucket := s3test.Bucket(t)
	path, data := partialtest.PatternFile(t, 3*s3.DownloadChunk+12345)
	u := s3test.PutFile(t, bucket, "m.bin", path)
	m, err := client.OpenMemory(context.Background(), u, 100, s3.Options{})
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, int64(len(data)), m.Size())
	require.NoError(t, m.Acquire())
	b, err := m.View(0, m.Size())
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, b))
	v, err := m.View(100, 1)
	require.NoError(t, err)
	assert.Zero(t, uintptrOf(v)%64, "byte 100 on a cache line")
	m.Release()
	empty := s3test.Put(t, bucket, "empty.bin", nil)
	e, err := client.OpenMemory(context.Background(), empty, 0, s3.Options{})
	require.NoError(t, err)
	require.Zero(t, e.Size())
	require.NoError(t, e.Close())
}

func TestCloseIdempotentError(t *testing.T) {
	bucket := s3test.Bucket(t)
	u := s3test.Put(t, bucket, "z", []byte("abc"))
	o, err := client.Open(context.Background(), u, s3.Options{})
	require.NoError(t, err)
	require.NoError(t, o.Close())
	require.True(t, errors.Is(o.Close(), partial.ErrClosed))
	require.True(t, errors.Is(o.CheckFile(context.Background()), partial.ErrClosed))
	require.True(t, strings.HasPrefix(o.Name(), "s3://"))
}

// TestServerRestarted: while the server is down reads fail with a clear
// error after the bounded attempts (connection refused); once it is back
// on the same address the same Object serves again, the right bytes.
func TestServerRestarted(t *testing.T) {
	bucket := s3test.Bucket(t)
	path, data := partialtest.PatternFile(t, 512<<10)
	u := s3test.PutFile(t, bucket, "r.bin", path)
	fp := s3test.NewFaultProxy(t)
	o, err := client.Open(context.Background(), u, s3.Options{Endpoint: fp.URL, HeadBytes: 1024, MaxAttempts: 3, Backoff: time.Millisecond})
	require.NoError(t, err)
	defer o.Close()
	p := make([]byte, 100)
	_, err = o.ReadAtContext(context.Background(), p, 200000, nil)
	require.NoError(t, err)

	fp.Stop() // down
	_, err = o.ReadAtContext(context.Background(), p, 300000, nil)
	require.Error(t, err)
	assert.NotErrorIs(t, err, partial.ErrFileChanged)
	assert.ErrorIs(t, err, s3.ErrRequestFailed)
	assert.Contains(t, err.Error(), "after 3 attempt(s)")
	assert.Contains(t, err.Error(), "connection refused")
	assert.Contains(t, err.Error(), u)

	fp.Start(t) // back up
	_, err = o.ReadAtContext(context.Background(), p, 300000, nil)
	require.NoError(t, err)
	require.Equal(t, data[300000:300100], p)
}

// TestStalledServerBounded: a server that answers nothing costs each
// attempt its timeout, but the attempts together stop at three times it,
// with an error that says so, not MaxAttempts times it.
func TestStalledServerBounded(t *testing.T) {
	bucket := s3test.Bucket(t)
	path, _ := partialtest.PatternFile(t, 1<<20)
	u := s3test.PutFile(t, bucket, "stall.bin", path)
	fp := s3test.NewFaultProxy(t)
	o, err := client.Open(context.Background(), u, s3.Options{Endpoint: fp.URL, HeadBytes: 4096, Timeout: 200 * time.Millisecond, MaxAttempts: 20, Backoff: time.Millisecond})
	require.NoError(t, err)
	defer o.Close()
	fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool {
		s3test.Stall(r, 10*time.Second)
		return true
	})
	start := time.Now()
	_, err = o.ReadAtContext(context.Background(), make([]byte, 100), 500000, nil)
	took := time.Since(start)
	require.ErrorIs(t, err, s3.ErrRequestFailed)
	assert.Contains(t, err.Error(), "three times the 200ms timeout")
	assert.Less(t, took, 2*time.Second, "20 attempts of 200 ms would take 4 s")
	fp.Clear()
	_, err = o.ReadAtContext(context.Background(), make([]byte, 100), 500000, nil)
	require.NoError(t, err, "the server answers again")
}

// TestUnusableAnswers: an open whose answer has no ETag, a weak one, *, or
// a size past MaxObjectSize fails as the store's fault (ErrRequestFailed,
// a server's 502) naming the problem, and never panics.
func TestUnusableAnswers(t *testing.T) {
	bucket := s3test.Bucket(t)
	path, _ := partialtest.PatternFile(t, 1<<16)
	u := s3test.PutFile(t, bucket, "bad.bin", path)
	fp := s3test.NewFaultProxy(t)
	for _, c := range []struct{ etag, total, want string }{
		{"", "65536", "gave no ETag"},
		{`W/"x"`, "65536", "If-Match cannot pin"},
		{"*", "65536", "If-Match cannot pin"},
		{`"e1"`, "9223372036854775807", "more than the"},
		{`"e1"`, "4398046511105", "more than the"},
	} {
		fp.Set(func(_ int64, w http.ResponseWriter, _ *http.Request) bool {
			if c.etag != "" {
				w.Header().Set("ETag", c.etag)
			}
			w.Header().Set("Content-Range", "bytes 0-4095/"+c.total)
			w.Header().Set("Content-Length", "4096")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(make([]byte, 4096))
			return true
		})
		_, err := client.Open(context.Background(), u, s3.Options{Endpoint: fp.URL, HeadBytes: 4096, MaxAttempts: 1})
		require.ErrorIs(t, err, s3.ErrRequestFailed, "%+v", c)
		assert.Contains(t, err.Error(), c.want, "%+v", c)
	}
}

// TestClient: a Client's defaults apply to its opens (its endpoint: a
// proxy sees the requests), an open's own options win over them, and a nil
// Client opens with one of its own, from the environment.
func TestClient(t *testing.T) {
	bucket := s3test.Bucket(t)
	data := []byte("hello, client")
	u := s3test.Put(t, bucket, "client.bin", data)
	fp := s3test.NewFaultProxy(t)
	c := s3.NewClient(s3.Options{Endpoint: fp.URL, HeadBytes: 4})
	before := fp.Total.Load()
	o, err := c.Open(context.Background(), u, s3.Options{})
	require.NoError(t, err)
	assert.Equal(t, before+1, fp.Total.Load(), "through the default endpoint")
	assert.Equal(t, int64(4), o.Stats().ResidentBytes, "the default head")
	require.NoError(t, o.Close())
	o, err = c.Open(context.Background(), u, s3.Options{HeadBytes: 64})
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)), o.Stats().ResidentBytes, "the open's own head")
	require.NoError(t, o.Close())

	before = fp.Total.Load()
	var none *s3.Client
	o, err = none.Open(context.Background(), u, s3.Options{})
	require.NoError(t, err)
	defer o.Close()
	p := make([]byte, len(data))
	_, err = o.ReadAtContext(context.Background(), p, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, data, p)
	assert.Equal(t, before, fp.Total.Load(), "the environment's endpoint, not the other client's")
}
