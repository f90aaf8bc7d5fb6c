package diskcache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// fakeObject is an object in memory with a name and an ETag; it counts
// the reads that reach it, and can hold them at a gate (until their
// context ends, as the s3 backend's reads do).
type fakeObject struct {
	name, etag string
	data       []byte
	gate       chan struct{} // when not nil, every read waits for it to close
	entered    atomic.Int64  // reads that reached the object (gate or not)

	reads       atomic.Int64 // ranges read (ReadAt calls, batch requests)
	readBytes   atomic.Int64
	batches     atomic.Int64
	closed      atomic.Bool
	mu          sync.Mutex
	batchSizes  []int
	failAt      int64 // a read covering this offset fails (when >= 0)
	failEnabled bool
}

func newFake(name, etag string, data []byte) *fakeObject {
	return &fakeObject{name: name, etag: etag, data: data, failAt: -1}
}

func (f *fakeObject) Name() string { return f.name }
func (f *fakeObject) ETag() string { return f.etag }
func (f *fakeObject) Size() int64  { return int64(len(f.data)) }

func (f *fakeObject) Close() error {
	if f.closed.Swap(true) {
		return backendkit.Closed(f.name)
	}
	return nil
}

func (f *fakeObject) read(ctx context.Context, p []byte, off int64) error {
	f.entered.Add(1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if f.closed.Load() {
		return backendkit.Closed(f.name)
	}
	if err := backendkit.CheckRange(f.name, off, int64(len(p)), f.Size()); err != nil {
		return err
	}
	if f.failEnabled && off <= f.failAt && f.failAt < off+int64(len(p)) {
		return fmt.Errorf("fake: injected failure at %d", f.failAt)
	}
	f.reads.Add(1)
	f.readBytes.Add(int64(len(p)))
	copy(p, f.data[off:])
	return nil
}

func (f *fakeObject) ReadAtContext(ctx context.Context, p []byte, off int64, _ *partial.Tally) (int, error) {
	if err := f.read(ctx, p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// batchObject is a fakeObject that offers ReadBatch.
type batchObject struct{ *fakeObject }

func (b batchObject) ReadBatch(ctx context.Context, reqs []partial.ReadReq) error {
	b.batches.Add(1)
	b.mu.Lock()
	b.batchSizes = append(b.batchSizes, len(reqs))
	b.mu.Unlock()
	var first error
	for i := range reqs {
		if reqs[i].Err = b.read(ctx, reqs[i].Buf, reqs[i].Off); reqs[i].Err != nil && first == nil {
			first = reqs[i].Err
		}
	}
	return first
}

func (f *fakeObject) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batchSizes...)
}
