package main

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLimitHeapAboveWhatTheRuntimeHolds: the memory limit --memory-budget
// sets leaves the plan's heap share above everything the runtime already
// holds (heap, metadata, stacks), not above the live heap alone: the
// runtime counts all of it against the limit, and a limit at or below it
// makes the collector run without pause.
func TestLimitHeapAboveWhatTheRuntimeHolds(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	const share = 4 << 20
	l := &loadedIndex{heapBytes: share}
	l.limitHeap()
	t.Cleanup(func() { debug.SetMemoryLimit(l.prevLimit) })
	limit := debug.SetMemoryLimit(-1)
	held := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(held)
	now := int64(held[0].Value.Uint64() - held[1].Value.Uint64())
	require.GreaterOrEqual(t, limit-now, int64(share*3/4), "limit %d, the runtime holds %d", limit, now)
}
