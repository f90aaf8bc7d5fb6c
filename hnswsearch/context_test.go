package hnswsearch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// stallStore is a storage whose reads, while stalled, wait as a stalled
// object store does: forever, or until their context ends.
type stallStore struct {
	partial.Storage
	stalled atomic.Bool
	reads   atomic.Int64
}

func (s *stallStore) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	s.reads.Add(1)
	for s.stalled.Load() {
		select {
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-time.After(time.Millisecond):
		}
	}
	return s.Storage.ReadAtContext(ctx, p, off, t)
}

// TestContextReachesReads: a query whose storage stalls ends at its
// deadline with ErrDeadline (its context reaching the reads, through a
// block cache), one whose context is cancelled ends with the cancellation
// (not ErrDeadline), and the index answers as before once the storage
// does.
func TestContextReachesReads(t *testing.T) {
	st := &stallStore{Storage: openFixture(t, "hnsw_flat_large", storage.Options{Backend: "pread"})}
	c, err := blockcache.NewCached("stall", st, nil, 16<<10, 4096) // four blocks: queries keep reading
	require.NoError(t, err)
	x := openIndex(t, c, Options{BatchReads: true})
	q := make([]float32, x.Dim())
	q[0] = 1
	p := Params{K: 10, EfSearch: 64}
	want, _, err := x.Search(q, p, nil)
	require.NoError(t, err)

	st.stalled.Store(true)
	before := st.reads.Load()
	deadline := time.Now().Add(200 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	p.Deadline, p.Ctx = deadline, ctx
	_, _, err = x.Search(q, p, nil)
	assert.ErrorIs(t, err, ErrDeadline)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(deadline), 500*time.Millisecond, "the query ended long after its deadline")
	assert.Greater(t, st.reads.Load(), before, "the query read nothing: the stall was not tested")

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	p.Deadline, p.Ctx = time.Now().Add(time.Minute), ctx
	q[1] = 1 // other nodes: other blocks
	_, _, err = x.Search(q, p, nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrDeadline)

	st.stalled.Store(false)
	q[1] = 0
	got, _, err := x.Search(q, Params{K: 10, EfSearch: 64}, nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
