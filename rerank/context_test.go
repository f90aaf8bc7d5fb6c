package rerank

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// stalledStorage answers no read until its context ends, as a stalled
// object store; a read without one waits until the test ends.
type stalledStorage struct {
	*partial.Memory
	end chan struct{}
}

func (s *stalledStorage) ReadAtContext(ctx context.Context, p []byte, off int64, _ *partial.Tally) (int, error) {
	select {
	case <-s.end:
		return 0, os.ErrClosed
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

func (s *stalledStorage) ReadBatch(ctx context.Context, reqs []partial.ReadReq) error {
	var first error
	for i := range reqs {
		if _, reqs[i].Err = s.ReadAtContext(ctx, reqs[i].Buf, reqs[i].Off, nil); first == nil {
			first = reqs[i].Err
		}
	}
	return first
}

// TestRescoreGivesUpAtDeadline: a rescore over a stalled store gives up
// at its context's deadline, with an error wrapping it.
func TestRescoreGivesUpAtDeadline(t *testing.T) {
	src := filepath.Join(fixtures, "hnsw_flat_large.faiss")
	local, err := Open(src, "pread")
	require.NoError(t, err)
	defer local.Close()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	st := &stalledStorage{Memory: partial.NewMemory(src, data), end: make(chan struct{})}
	defer close(st.end)
	s := NewBatch(st, local.Layout)
	q := make([]float32, local.Dim)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.RescoreToContext(ctx, nil, q, []int32{1, 500, 2999}, 2, false, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
}
