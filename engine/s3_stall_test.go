package engine_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// TestS3OnDiskStallEndsAtDeadline: an on_disk query over an object store
// that stops answering (its S3 timeout a minute long) ends at its
// deadline with hnswsearch.ErrDeadline, its rerank's reads included, and
// answers again once the store does.
func TestS3OnDiskStallEndsAtDeadline(t *testing.T) {
	bucket := s3test.Bucket(t)
	local, fx := loadOnDisk(t, "clustered_l2")
	u := s3test.PutFile(t, bucket, "ondisk/stall.faiss", local)
	fp := s3test.NewFaultProxy(t)
	env := &engine.Env{S3: engine.NewS3Client(engine.S3Options{Endpoint: fp.URL, Timeout: time.Minute, MaxAttempts: 5})}
	x, _, err := engine.Open(engine.Spec{Path: u, Mode: engine.ModeOnDisk, Compression: "4x", GuideDir: t.TempDir(), Env: env})
	require.NoError(t, err)
	defer x.Close()
	qp, err := x.Plan(engine.Request{K: 10, EfSearch: 64, EfSearchSet: true})
	require.NoError(t, err)
	want, _, err := x.Query(&qp, fx.Queries[0], nil)
	require.NoError(t, err)

	fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool { s3test.Stall(r, time.Hour); return true })
	gets := fp.GETs.Load()
	for i, q := range fx.Queries[1:4] {
		deadline := time.Now().Add(300 * time.Millisecond)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		qp.SetDeadline(deadline)
		qp.SetContext(ctx)
		errc := make(chan error, 1)
		go func() { _, _, err := x.Query(&qp, q, nil); errc <- err }()
		var err error
		select {
		case err = <-errc:
		case <-time.After(10 * time.Second):
			t.Fatalf("query %d: no answer 10 s after its deadline", i)
		}
		cancel()
		assert.ErrorIs(t, err, hnswsearch.ErrDeadline, "query %d", i)
		assert.Less(t, time.Since(deadline), 700*time.Millisecond, "query %d ended long after its deadline", i)
	}
	assert.Greater(t, fp.GETs.Load(), gets, "the queries asked the store nothing: the stall was not tested")

	fp.Clear()
	qp.SetDeadline(time.Time{})
	qp.SetContext(nil)
	got, _, err := x.Query(&qp, fx.Queries[0], nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestS3StallLoadAndWarmEndWithContext: over an object store that stops
// answering (its S3 timeout a minute long), an open in each mode ends
// soon after Spec.Ctx's deadline with an error wrapping
// context.DeadlineExceeded, as does WarmContext of an index already open,
// which serves again once the store answers.
func TestS3StallLoadAndWarmEndWithContext(t *testing.T) {
	bucket := s3test.Bucket(t)
	u := s3test.PutFile(t, bucket, "stall/large.faiss", "../testdata/fixtures/hnsw_flat_large.faiss")
	fp := s3test.NewFaultProxy(t)
	env := &engine.Env{S3: engine.NewS3Client(engine.S3Options{Endpoint: fp.URL, Timeout: time.Minute, MaxAttempts: 5})}
	stall := func() {
		fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool { s3test.Stall(r, time.Hour); return true })
	}
	within := func(t *testing.T, what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		gets := fp.GETs.Load()
		start := time.Now()
		errc := make(chan error, 1)
		go func() { errc <- f(ctx) }()
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, context.DeadlineExceeded, what)
			assert.Less(t, time.Since(start), time.Second, "%s ended after %v", what, time.Since(start))
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no end 20 s after its deadline", what)
		}
		assert.Greater(t, fp.GETs.Load(), gets, "%s asked the store nothing: the stall was not tested", what)
	}
	stall()
	for _, mode := range []engine.Mode{"memory_efficient", "full", engine.ModeOnDisk} {
		within(t, "open "+string(mode), func(ctx context.Context) error {
			x, _, err := engine.Open(engine.Spec{Path: u, Mode: mode, GuideDir: t.TempDir(), Ctx: ctx, Env: env})
			if err == nil {
				x.Close()
			}
			return err
		})
	}

	fp.Clear()
	x, _, err := engine.Open(engine.Spec{Path: u, Mode: "memory_efficient", CacheBytes: 1 << 20, Env: env})
	require.NoError(t, err)
	defer x.Close()
	stall()
	within(t, "warm", x.WarmContext)
	fp.Clear()
	require.NoError(t, x.Warm(), "the object serves again, its reads no longer bound to the warm-up")
}
