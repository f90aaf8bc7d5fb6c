//go:build unix && !linux

package partial

// Warm reads [off, off+n) ahead (MADV_WILLNEED); huge pages and
// MADV_POPULATE_READ are Linux's.
func (m *Mmap) Warm(off, n int64) error { return m.WillNeed(off, n) }
