package blockcache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// gate is a storage whose reads wait until open is closed, as a stalled
// object store does; reads under a context give up when it ends.
type gate struct {
	*partial.Memory
	open  chan struct{}
	calls atomic.Int64
}

func (g *gate) ReadAt(p []byte, off int64) (int, error) {
	g.calls.Add(1)
	<-g.open
	return g.Memory.ReadAt(p, off)
}

func (g *gate) ReadAtContext(ctx context.Context, p []byte, off int64, _ *partial.Tally) (int, error) {
	g.calls.Add(1)
	select {
	case <-g.open:
		return g.Memory.ReadAt(p, off)
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

func newGate(t *testing.T) (*gate, *Cached, []byte) {
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	g := &gate{Memory: partial.NewMemory("gate", data), open: make(chan struct{})}
	c, err := NewCached("gate", g, nil, 1<<20, 4096)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return g, c, data
}

// TestWaiterGivesUpAtItsDeadline: a read waiting for a block another read
// is loading (from a stalled store, with no deadline of its own) gives up
// at its own context's deadline, and the loader still gets its block.
func TestWaiterGivesUpAtItsDeadline(t *testing.T) {
	g, c, data := newGate(t)
	loaded := make(chan error, 1)
	go func() {
		buf := make([]byte, 100)
		_, err := c.ReadAt(buf, 10)
		if err == nil && string(buf) != string(data[10:110]) {
			err = assert.AnError
		}
		loaded <- err
	}()
	require.Eventually(t, func() bool { return g.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.ReadAtContext(ctx, make([]byte, 100), 20, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
	assert.EqualValues(t, 1, g.calls.Load(), "the waiter read the block itself")
	close(g.open)
	require.NoError(t, <-loaded)
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
	require.Eventually(t, func() bool { return g.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	waited := make(chan error, 1)
	buf := make([]byte, 100)
	go func() {
		_, err := c.ReadAtContext(context.Background(), buf, 20, nil)
		waited <- err
	}()
	assert.ErrorIs(t, <-gaveUp, context.DeadlineExceeded)
	close(g.open)
	require.NoError(t, <-waited)
	assert.Equal(t, data[20:120], buf)
	assert.EqualValues(t, 2, g.calls.Load())
}

// TestBatchUnderContext: a batch over a stalled store gives up at its
// context's deadline, each request carrying the error.
func TestBatchUnderContext(t *testing.T) {
	_, c, _ := newGate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	reqs := []partial.ReadReq{{Off: 0, Buf: make([]byte, 10)}, {Off: 8192, Buf: make([]byte, 10)}}
	start := time.Now()
	err := c.ReadBatchContext(ctx, reqs)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
	for _, q := range reqs {
		assert.ErrorIs(t, q.Err, context.DeadlineExceeded)
	}
}
