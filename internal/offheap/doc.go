// Package offheap hands out large byte buffers outside the Go heap: the
// garbage collector neither scans them nor counts them toward its heap goal,
// so a memory budget spent on them is not doubled by collection headroom.
// A buffer is zeroed, must be released exactly once with Free, and must not
// be used after.
package offheap
