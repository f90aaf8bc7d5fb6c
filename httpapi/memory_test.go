package httpapi

import (
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/sysmem"
)

func TestHeapLimit(t *testing.T) {
	const big = 1000 << 20 // from 1 GiB up, each share is 64 MiB
	assert.Equal(t, int64(64<<20), engine.OwnShare(big+1<<30))
	assert.Equal(t, int64(700<<20-64<<20), heapLimit(big+1<<30, 300<<20+1<<30, 64<<20), "what the indexes leave")
	assert.Equal(t, int64(64<<20+64<<20), heapLimit(big+1<<30, big+1<<30-90<<20, 64<<20), "never below the bodies admitted and the slack")
	assert.Equal(t, int64(64<<20+64<<20), heapLimit(big+1<<30, 2*big+1<<30, 64<<20), "indexes over the machine: the floor")
	// A cgroup of 64 MiB: shares of 8 MiB.
	assert.Equal(t, int64(8<<20), engine.OwnShare(64<<20))
	assert.Equal(t, int64(64<<20-40<<20-8<<20), heapLimit(64<<20, 40<<20, 8<<20))
	assert.Equal(t, int64(16<<20), heapLimit(64<<20, 60<<20, 8<<20))
}

// TestDefaultNodeBudget: without a memory_budget the node's indexes get the
// machine's memory less the server's own three shares, and at least an
// eighth of it; an unknown machine, no budget.
func TestDefaultNodeBudget(t *testing.T) {
	assert.Equal(t, int64(24<<30-192<<20), defaultNodeBudget(24<<30), "three 64 MiB shares")
	assert.Equal(t, int64(512<<20-96<<20), defaultNodeBudget(512<<20), "shares of a sixteenth: 32 MiB")
	assert.Equal(t, int64(64<<20-24<<20), defaultNodeBudget(64<<20), "shares of 8 MiB at least")
	assert.Equal(t, int64(20<<20/8), defaultNodeBudget(20<<20), "less than the shares: an eighth")
	assert.Zero(t, defaultNodeBudget(0))
	l := Limits{}.withDefaults(64 << 20)
	assert.Equal(t, int64(8<<20), l.MaxBodiesInFlight, "the bodies in flight are one of the shares")
	assert.Equal(t, int64(64<<20), Limits{}.withDefaults(24<<30).MaxBodiesInFlight)
	// The work of requests and connections scale too, below 2 GiB.
	assert.Equal(t, int64(32768), l.MaxRequestWork, "a 2048th of 64 MiB")
	assert.Equal(t, int64(65536), l.MaxWorkInFlight)
	assert.Equal(t, 256, l.MaxConnections, "8 MiB at 32 KiB a connection")
	big := Limits{}.withDefaults(24 << 30)
	assert.Equal(t, int64(1<<20), big.MaxRequestWork)
	assert.Equal(t, 2048, big.MaxConnections)
	assert.Equal(t, int64(1<<20), Limits{}.withDefaults(0).MaxRequestWork, "an unknown machine: the full default")
}

// TestNodeBudgetWithinMachine: a node budget set above what the machine
// can give its indexes is cut to that, and logged; one within it is kept.
func TestNodeBudgetWithinMachine(t *testing.T) {
	total := sysmem.Total()
	if total <= 0 {
		t.Skip("no memory total here")
	}
	s, _ := newTestServer(t, Config{MemoryBudget: 1 << 50})
	assert.Equal(t, defaultNodeBudget(total), s.MemoryBudget())
	s, _ = newTestServer(t, Config{})
	assert.Equal(t, defaultNodeBudget(total), s.MemoryBudget())
	s, _ = newTestServer(t, Config{MemoryBudget: 5 << 20})
	assert.Equal(t, int64(5<<20), s.MemoryBudget())
}

// TestLimitHeapFollowsIndexes: while the server runs, the runtime's memory
// limit is the machine's memory less what the indexes hold, following a
// load and an unload, and the limit found is put back when it stops.
func TestLimitHeapFollowsIndexes(t *testing.T) {
	total := sysmem.Total()
	if total <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("no memory total here, or GOMEMLIMIT set")
	}
	s, _ := newTestServer(t, Config{SetMemoryLimit: debug.SetMemoryLimit})
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
