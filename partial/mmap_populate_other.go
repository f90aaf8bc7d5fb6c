//go:build unix && !linux

package partial

import "context"

// Warm reads [off, off+n) ahead (MADV_WILLNEED), which does not block;
// huge pages and MADV_POPULATE_READ are Linux's.
func (m *Mmap) Warm(_ context.Context, off, n int64) error { return m.WillNeed(off, n) }
