package partial

import (
	"fmt"
	"io"
)

// Memory holds a whole file in RAM. It implements
// Storage, Viewer and StatsReporter.
type Memory struct{ region }

// NewMemory serves b; b must not be modified afterwards.
func NewMemory(name string, b []byte) *Memory {
	m := &Memory{region{name: name, data: b}}
	m.life.Free = func() error { m.data = nil; return nil }
	return m
}

// OpenMemory reads the file at path into memory with large sequential reads
// (outside the Go heap, on huge pages where the kernel allows).
func OpenMemory(path string, opts ...OpenOption) (*Memory, error) {
	return OpenMemoryAligned(path, 0, opts...)
}

// OpenMemoryAligned is OpenMemory placing the file's byte at offset align on
// a cache-line (64-byte) boundary: given the vectors section's offset, each
// vector then spans the fewest cache lines (a 512-byte vector 8, not 9),
// one line fewer to fetch for every distance a search computes.
func OpenMemoryAligned(path string, align int64, opts ...OpenOption) (*Memory, error) {
	h, err := OpenHandle(path, opts...)
	if err != nil {
		return nil, err
	}
	return ReadMemory(h, align)
}

// ReadMemory is OpenMemoryAligned of the file h holds; it takes h over,
// and closes it once the file is read.
func ReadMemory(h *Handle, align int64) (*Memory, error) {
	f, id, err := h.take()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	adviseNormal(f)
	name, size := h.name, id.size
	pad := 0
	if align > 0 {
		pad = int((cacheLine - align%cacheLine) % cacheLine)
	}
	buf, free := allocLarge(int(size) + pad)
	b := buf[pad : pad+int(size) : pad+int(size)]
	m := NewMemory(name, b)
	m.life.Free = func() error { m.data = nil; return free() }
	for off := 0; off < len(b); {
		n, err := f.ReadAt(b[off:min(len(b), off+8<<20)], int64(off))
		m.osRead(n)
		off += n
		if err != nil && !(err == io.EOF && off == len(b)) {
			free()
			return nil, fmt.Errorf("reading %s at offset %d: %w", name, off, err)
		}
	}
	return m, nil
}

func (m *Memory) Stats() Stats {
	s := m.snapshot()
	s.ResidentBytes = int64(len(m.data))
	return s
}

// cacheLine is the CPU's cache line size on the machines we target.
const cacheLine = 64
