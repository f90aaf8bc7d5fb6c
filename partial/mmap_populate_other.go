//go:build unix && !linux

package partial

// Populate reads [off, off+n) ahead (MADV_WILLNEED); huge pages and
// MADV_POPULATE_READ are Linux's.
func (m *Mmap) Populate(off, n int64) error { return m.WillNeed(off, n) }
