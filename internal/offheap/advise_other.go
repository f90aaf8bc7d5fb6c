//go:build unix && !linux

package offheap

// adviseHuge is a no-op where MADV_HUGEPAGE does not exist.
func adviseHuge([]byte) {}

// Populate is not available here: pages are backed at their first write.
func Populate([]byte) bool { return false }
