//go:build unix && !linux

package partial

// SetFileLeases reports false: leases are Linux's; every per-query file
// check is an fstat here.
func SetFileLeases(on bool) (prev bool) { return false }

func (w *fileWatch) lease() bool { return false }

func (w *fileWatch) unlease() {}

func (w *fileWatch) verifyLease() {}
