package partial

import (
	"fmt"
	"io"
)

// Memory holds a whole file in RAM (loading mode "full"). It implements
// Storage, Viewer and StatsReporter.
type Memory struct{ region }

// NewMemory serves b; b must not be modified afterwards.
func NewMemory(name string, b []byte) *Memory {
	m := &Memory{region{name: name, data: b}}
	m.life.free = func() error { m.data = nil; return nil }
	return m
}

// OpenMemory reads the file at path into memory with large sequential reads
// (outside the Go heap, on huge pages where the kernel allows).
func OpenMemory(path string) (*Memory, error) {
	f, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, free := allocLarge(int(size))
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

func (m *Memory) Stats() Stats {
	s := m.snapshot()
	s.ResidentBytes = int64(cap(m.data))
	return s
}
