package partial

import (
	"fmt"
	"io"
	"os"
)

// Memory holds a whole file in RAM (loading mode "full"). It implements
// Storage, Viewer and StatsReporter.
type Memory struct {
	name string
	data []byte
	life life
	counters
}

// NewMemory serves b; b must not be modified afterwards.
func NewMemory(name string, b []byte) *Memory {
	m := &Memory{name: name, data: b}
	m.life.free = func() error { m.data = nil; return nil }
	return m
}

// OpenMemory reads the file at path into memory with large sequential reads
// (outside the Go heap, on huge pages where the kernel allows).
func OpenMemory(path string) (*Memory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b, free := allocLarge(int(st.Size()))
	m := NewMemory(path, b)
	m.life.free = func() error { m.data = nil; return free() }
	for off := 0; off < len(b); {
		n, err := f.ReadAt(b[off:min(len(b), off+8<<20)], int64(off))
		m.osRead(n)
		off += n
		if err != nil && !(err == io.EOF && off == len(b)) {
			free()
			return nil, fmt.Errorf("partial: memory: reading %s at offset %d: %w", path, off, err)
		}
	}
	return m, nil
}

func (m *Memory) Size() int64 { return int64(len(m.data)) }

func (m *Memory) ReadAt(p []byte, off int64) (int, error) {
	if !m.life.acquire() {
		return 0, closedErr(m.name)
	}
	defer m.life.release()
	m.request(len(p))
	if err := rangeCheck(m.name, off, int64(len(p)), int64(len(m.data))); err != nil {
		return 0, err
	}
	return copy(p, m.data[off:]), nil
}

func (m *Memory) Acquire() error {
	if !m.life.acquire() {
		return closedErr(m.name)
	}
	return nil
}

func (m *Memory) Release() { m.life.release() }

func (m *Memory) View(off, n int64) ([]byte, error) {
	m.request(int(n))
	if err := rangeCheck(m.name, off, n, int64(len(m.data))); err != nil {
		return nil, err
	}
	return m.data[off : off+n : off+n], nil
}

func (m *Memory) Close() error { return m.life.close(m.name) }

func (m *Memory) Stats() Stats {
	s := m.snapshot()
	s.ResidentBytes = int64(cap(m.data))
	return s
}
