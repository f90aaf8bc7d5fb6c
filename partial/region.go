package partial

import (
	"context"

	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// region serves a file's bytes held in addressable memory (a heap copy or
// a mapping): reads copy, views do not. Memory and Mmap embed it.
type region struct {
	name string
	data []byte
	life backendkit.Life
	counters
}

func (m *region) Size() int64 { return int64(len(m.data)) }

// ReadAtContext copies from memory: it cannot block, so it ignores ctx, and
// counts nothing in t (no device read).
func (m *region) ReadAtContext(_ context.Context, p []byte, off int64, _ *Tally) (int, error) {
	if !m.life.Acquire() {
		return 0, backendkit.Closed(m.name)
	}
	defer m.life.Release()
	m.request(len(p))
	if err := backendkit.CheckRange(m.name, off, int64(len(p)), int64(len(m.data))); err != nil {
		return 0, err
	}
	return copy(p, m.data[off:]), nil
}

func (m *region) Acquire() error {
	if !m.life.Acquire() {
		return backendkit.Closed(m.name)
	}
	return nil
}

func (m *region) Release() { m.life.Release() }

func (m *region) View(off, n int64) ([]byte, error) {
	m.request(int(n))
	if err := backendkit.CheckRange(m.name, off, n, int64(len(m.data))); err != nil {
		return nil, err
	}
	return m.data[off : off+n : off+n], nil
}

func (m *region) Close() error { return m.life.Close(m.name) }
