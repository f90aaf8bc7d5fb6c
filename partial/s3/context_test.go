package s3_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// TestReadAtContextEnds: a read under a context ends at the context's
// deadline whatever holds it, with an error wrapping
// context.DeadlineExceeded and not ErrRequestFailed (the caller gave up;
// the store is not known to have failed): a stalled GET (the per-request
// timeout a minute long), a backoff between retries (seconds long), a wait
// for a request slot held by a stalled read, and a batch.
func TestReadAtContextEnds(t *testing.T) {
	bucket := s3test.Bucket(t)
	u := s3test.Put(t, bucket, "ctx.bin", make([]byte, 1<<20))
	fp := s3test.NewFaultProxy(t)
	o, err := client.Open(context.Background(), u, s3.Options{Endpoint: fp.URL, HeadBytes: 4096, Timeout: time.Minute, MaxAttempts: 5, Backoff: 10 * time.Second, Parallel: 1})
	require.NoError(t, err)
	defer o.Close()
	within := func(t *testing.T, read func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := read(ctx)
		took := time.Since(start)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, errors.Is(err, s3.ErrRequestFailed), "%v", err)
		assert.Less(t, took, time.Second, "the read ended after %v", took)
	}
	p := make([]byte, 100)
	read := func(ctx context.Context) error { _, err := o.ReadAtContext(ctx, p, 500_000, nil); return err }

	t.Run("stall", func(t *testing.T) {
		fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool { s3test.Stall(r, time.Hour); return true })
		within(t, read)
	})
	t.Run("backoff", func(t *testing.T) {
		fp.Set(func(_ int64, w http.ResponseWriter, _ *http.Request) bool { s3test.SlowDown(w); return true })
		before := fp.GETs.Load()
		within(t, read)
		assert.Equal(t, before+1, fp.GETs.Load(), "one attempt, then the backoff")
	})
	t.Run("slot", func(t *testing.T) {
		fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool { s3test.Stall(r, time.Hour); return true })
		hold, release := context.WithCancel(context.Background())
		held := make(chan error, 1)
		base := fp.GETs.Load()
		go func() { _, err := o.ReadAtContext(hold, make([]byte, 10), 300_000, nil); held <- err }()
		require.Eventually(t, func() bool { return fp.GETs.Load() > base }, 5*time.Second, time.Millisecond)
		before := fp.GETs.Load()
		within(t, read) // Parallel 1: waits for the slot
		assert.Equal(t, before, fp.GETs.Load(), "the read got a slot it could not have")
		release()
		assert.ErrorIs(t, <-held, context.Canceled)
	})
	t.Run("batch", func(t *testing.T) {
		fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool { s3test.Stall(r, time.Hour); return true })
		reqs := []partial.ReadReq{{Off: 100_000, Buf: make([]byte, 10)}, {Off: 900_000, Buf: make([]byte, 10)}}
		within(t, func(ctx context.Context) error { return o.ReadBatch(ctx, reqs) })
		for _, q := range reqs {
			assert.ErrorIs(t, q.Err, context.DeadlineExceeded)
		}
	})
	fp.Clear()
	_, err = o.ReadAtContext(context.Background(), p, 500_000, nil)
	assert.NoError(t, err, "the object serves again")
}

// TestOpenAndReaderAtEnd: an open ends with its context, and so do the
// reads of code that takes an io.ReaderAt (a parser) through
// partial.ReaderAt; with a context that goes on they wait as before.
func TestOpenAndReaderAtEnd(t *testing.T) {
	bucket := s3test.Bucket(t)
	u := s3test.Put(t, bucket, "bind.bin", make([]byte, 1<<20))
	fp := s3test.NewFaultProxy(t)
	stall := func() {
		fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool { s3test.Stall(r, time.Hour); return true })
	}
	opts := s3.Options{Endpoint: fp.URL, HeadBytes: 4096, Timeout: time.Minute, MaxAttempts: 5}

	stall()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := client.Open(ctx, u, opts)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second, "the open ended after %v", time.Since(start))

	fp.Clear()
	o, err := client.Open(context.Background(), u, opts)
	require.NoError(t, err)
	defer o.Close()
	stall()
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = partial.ReaderAt(ctx, o).ReadAt(make([]byte, 10), 500_000)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, errors.Is(err, s3.ErrRequestFailed), "%v", err)
	assert.Less(t, time.Since(start), time.Second, "the read ended after %v", time.Since(start))

	fp.Clear()
	_, err = partial.ReaderAt(context.Background(), o).ReadAt(make([]byte, 10), 500_000)
	assert.NoError(t, err)
}

// TestReasonForUsers: a request that failed for good has a reason for
// users naming the object and what happened, without the SDK's text; the
// error itself keeps it for logs.
func TestReasonForUsers(t *testing.T) {
	bucket := s3test.Bucket(t)
	u := s3test.Put(t, bucket, "reason.bin", make([]byte, 1<<20))
	fp := s3test.NewFaultProxy(t)
	o, err := client.Open(context.Background(), u, s3.Options{Endpoint: fp.URL, HeadBytes: 4096, Timeout: 100 * time.Millisecond, MaxAttempts: 2, Backoff: time.Millisecond})
	require.NoError(t, err)
	defer o.Close()
	fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool { s3test.Stall(r, time.Hour); return true })
	_, err = o.ReadAtContext(context.Background(), make([]byte, 10), 500_000, nil)
	require.ErrorIs(t, err, s3.ErrRequestFailed)
	assert.ErrorIs(t, err, partial.ErrStoreFailed, "the storage layers above see the store failed")
	r, ok := s3.Reason(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, u+": the object store did not answer within 100ms (2 attempts)", r)
	assert.Contains(t, err.Error(), "GetObject", "the error keeps the SDK's text for logs")

	for _, c := range []struct {
		status int
		want   string
	}{
		{http.StatusForbidden, "the object store refused the request: 403 Forbidden (1 attempt)"},
		{http.StatusInternalServerError, "the object store answered 500 InternalServerError (2 attempts)"},
	} {
		fp.Set(func(_ int64, w http.ResponseWriter, _ *http.Request) bool {
			w.WriteHeader(c.status)
			return true
		})
		_, err = o.ReadAtContext(context.Background(), make([]byte, 10), 500_000, nil)
		r, ok = s3.Reason(err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, u+": "+c.want, r)
	}

	_, ok = s3.Reason(errors.New("other"))
	assert.False(t, ok)
}
