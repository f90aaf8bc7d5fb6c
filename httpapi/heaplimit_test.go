package httpapi

import (
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/internal/sysmem"
)

func TestHeapLimit(t *testing.T) {
	assert.Equal(t, int64(700<<20-outsideHeap), heapLimit(1000<<20, 300<<20, 64<<20), "what the indexes leave")
	assert.Equal(t, int64(64<<20+heapSlack), heapLimit(100<<20, 90<<20, 64<<20), "never below the bodies admitted and the slack")
	assert.Equal(t, int64(64<<20+heapSlack), heapLimit(100<<20, 200<<20, 64<<20), "indexes over the machine: the floor")
}

// TestLimitHeapFollowsIndexes: while the server runs, the runtime's memory
// limit is the machine's memory less what the indexes hold, following a
// load and an unload, and the limit found is put back when it stops.
func TestLimitHeapFollowsIndexes(t *testing.T) {
	total := sysmem.Total()
	if total <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("no memory total here, or GOMEMLIMIT set")
	}
	s, _ := newTestServer(t, Config{})
	prev := debug.SetMemoryLimit(-1)
	stopped := make(chan struct{})
	go func() { s.limitHeap(); close(stopped) }()
	limitIs := func(want int64) func() bool { return func() bool { return debug.SetMemoryLimit(-1) == want } }
	bodies := s.limits.MaxBodiesInFlight
	require.Eventually(t, limitIs(heapLimit(total, 0, bodies)), 5*time.Second, 10*time.Millisecond)

	require.NoError(t, s.Reg.Load("f", LoadSpec{Path: "hnsw_flat_large.faiss", Mode: "full"}))
	used, _ := s.Reg.usage()
	require.Positive(t, used, "a full copy counts against the budget")
	require.Eventually(t, limitIs(heapLimit(total, used, bodies)), 5*time.Second, 10*time.Millisecond,
		"after a load: %d, want %d", debug.SetMemoryLimit(-1), heapLimit(total, used, bodies))

	require.NoError(t, s.Reg.Delete("f", time.Second))
	require.Eventually(t, limitIs(heapLimit(total, 0, bodies)), 5*time.Second, 10*time.Millisecond, "after the unload")

	s.Close()
	<-stopped
	assert.Equal(t, prev, debug.SetMemoryLimit(-1), "the limit found is put back")
}
