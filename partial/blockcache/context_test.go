package blockcache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
)

// TestStalledFill: the conformance of a cache over a stalled store; a
// read waiting on another reader's fill gives up at its own deadline.
func TestStalledFill(t *testing.T) {
	for _, budget := range []int64{1 << 20, 64 << 10} { // a mirror, and slots
		partialtest.RunStalledFill(t, func(t *testing.T, inner partial.Storage) partial.Storage {
			c, err := NewCached("stalled", inner, nil, budget, 4096)
			require.NoError(t, err)
			return c
		})
	}
}

func newGate(t *testing.T) (*partialtest.Stall, *Cached, []byte) {
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	g := partialtest.NewStall(partial.NewMemory("gate", data))
	c, err := NewCached("gate", g, nil, 1<<20, 4096)
	require.NoError(t, err)
	t.Cleanup(func() { g.Resume(); c.Close() })
	return g, c, data
}

// TestLoaderGivingUpLeavesWaitersTheirs: when the read loading a block
// gives up at its deadline, a read waiting for it with time left loads the
// block itself rather than failing with the other's deadline.
func TestLoaderGivingUpLeavesWaitersTheirs(t *testing.T) {
	g, c, data := newGate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.ReadAtContext(ctx, make([]byte, 100), 10, nil)
		gaveUp <- err
	}()
	require.Eventually(t, func() bool { return g.Calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	waited := make(chan error, 1)
	buf := make([]byte, 100)
	go func() {
		_, err := c.ReadAtContext(context.Background(), buf, 20, nil)
		waited <- err
	}()
	assert.ErrorIs(t, <-gaveUp, context.DeadlineExceeded)
	g.Resume()
	require.NoError(t, <-waited)
	assert.Equal(t, data[20:120], buf)
	assert.EqualValues(t, 2, g.Calls.Load())
}

// TestBatchUnderContext: a batch over a stalled store gives up at its
// context's deadline, each request carrying the error.
func TestBatchUnderContext(t *testing.T) {
	_, c, _ := newGate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	reqs := []partial.ReadReq{{Off: 0, Buf: make([]byte, 10)}, {Off: 8192, Buf: make([]byte, 10)}}
	start := time.Now()
	err := c.ReadBatch(ctx, reqs)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
	for _, q := range reqs {
		assert.ErrorIs(t, q.Err, context.DeadlineExceeded)
	}
}

// TestFrameWaitUnderContext: a reader waiting for a block another caller
// makes (Blocks.Get, as the zstd backend decodes a frame) gives up at its
// own deadline; the maker's block is then cached for the next reader.
func TestFrameWaitUnderContext(t *testing.T) {
	b := New(1 << 20).Register(4)
	defer b.Forget()
	release, loading := make(chan struct{}), make(chan struct{})
	made := make(chan error, 1)
	go func() {
		_, _, err := b.Get(context.Background(), 1, func() ([]byte, error) {
			close(loading)
			<-release
			return []byte("frame"), nil
		})
		made <- err
	}()
	<-loading
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, hit, err := b.Get(ctx, 1, func() ([]byte, error) { t.Error("the waiter loaded the block"); return nil, nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, hit)
	assert.Less(t, time.Since(start), time.Second)
	close(release)
	require.NoError(t, <-made)
	got, hit, err := b.Get(context.Background(), 1, nil)
	require.NoError(t, err)
	assert.True(t, hit)
	assert.Equal(t, "frame", string(got))
}
