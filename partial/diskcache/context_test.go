package diskcache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
)

// TestStalledFill: the conformance of the cache over a stalled object; a
// read waiting on another reader's fetch gives up at its own deadline.
func TestStalledFill(t *testing.T) {
	partialtest.RunStalledFill(t, func(t *testing.T, inner partial.Storage) partial.Storage {
		return open(t, namedObject{inner}, t.TempDir(), 1<<20)
	})
}

// namedObject gives a storage the name and version of an object.
type namedObject struct{ partial.Storage }

func (namedObject) Name() string { return "s3://b/stalled" }
func (namedObject) ETag() string { return "e1" }

// stalledCache is a cache over a 4-block object whose reads wait until
// obj.gate is closed.
func stalledCache(t *testing.T, seed byte) ([]byte, *fakeObject, *Cache) {
	t.Helper()
	data := pattern(4*testBS, seed)
	obj := newFake("s3://b/k", "e1", data)
	obj.gate = make(chan struct{})
	c := open(t, obj, t.TempDir(), 1<<20)
	t.Cleanup(func() { c.Close() })
	return data, obj, c
}

// fetching waits until block is being fetched with waiters callers
// waiting for that fetch.
func fetching(t *testing.T, c *Cache, block int64, waiters int) {
	t.Helper()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		cl := c.inflight[block]
		return cl != nil && cl.waiters == waiters
	}, 5*time.Second, time.Millisecond)
}

// TestContextEndsFetchAndWait: over a stalled object, a read under a
// context gives up at its deadline, whether it fetches the block itself or
// waits for another caller's fetch (one with no deadline); that caller
// still gets its bytes once the object answers.
func TestContextEndsFetchAndWait(t *testing.T) {
	data, obj, c := stalledCache(t, 3)

	// Fetching itself.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	start := time.Now()
	_, err := c.ReadAtContext(ctx, make([]byte, 10), 3*testBS, nil)
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)

	// Waiting for another's fetch.
	loaded := make(chan error, 1)
	p := make([]byte, 100)
	go func() {
		_, err := c.ReadAtContext(context.Background(), p, testBS+5, nil)
		loaded <- err
	}()
	fetching(t, c, 1, 0)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = c.ReadAtContext(ctx, make([]byte, 10), testBS+20, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
	close(obj.gate)
	require.NoError(t, <-loaded)
	assert.Equal(t, data[testBS+5:testBS+105], p)
}

// TestWaiterFetchesWhenFetcherGivesUp: a read waiting for a fetch whose
// caller gave up at its own deadline fetches the block itself.
func TestWaiterFetchesWhenFetcherGivesUp(t *testing.T) {
	data, obj, c := stalledCache(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.ReadAtContext(ctx, make([]byte, 10), 2*testBS, nil)
		gaveUp <- err
	}()
	fetching(t, c, 2, 0)
	waited := make(chan error, 1)
	p := make([]byte, 50)
	go func() {
		_, err := c.ReadAtContext(context.Background(), p, 2*testBS+7, nil)
		waited <- err
	}()
	fetching(t, c, 2, 1)
	assert.ErrorIs(t, <-gaveUp, context.DeadlineExceeded)
	close(obj.gate)
	require.NoError(t, <-waited)
	assert.Equal(t, data[2*testBS+7:2*testBS+57], p)
}
