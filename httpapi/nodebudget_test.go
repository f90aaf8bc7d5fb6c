package httpapi

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUsageFollowsHandles: what the registry keeps count of as loads,
// switches (caches shrunk and grown back on a tight budget) and deletes
// run at once is what walking the served handles sums: the bytes they
// count against the budget, and the descriptors they hold.
func TestUsageFollowsHandles(t *testing.T) {
	s, _ := newTestServer(t, Config{MemoryBudget: 6 << 20})
	specs := []LoadSpec{
		{Path: "hnsw_flat_large.faiss", Backend: "pread", CacheBytes: 1_500_000},
		{Path: "hnsw_flat_large.faiss", Mode: "full"},
		{Path: "hnsw_flat_l2.faiss", Backend: "mmap"},
		{Path: "hnsw_flat_l2.faiss", Backend: "direct"},
	}
	switches := []SwitchSpec{{Backend: "pread", CacheBytes: 1_000_000}, {Mode: "full"}, {Backend: "mmap"}, {Backend: "direct"}}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 60 {
				name := fmt.Sprint("i", rng.IntN(5))
				switch rng.IntN(3) {
				case 0:
					s.Reg.Load(name, specs[rng.IntN(len(specs))])
				case 1:
					s.Reg.Switch(t.Context(), name, switches[rng.IntN(len(switches))])
				default:
					s.Reg.Delete(name, 0)
				}
			}
		})
	}
	wg.Wait()
	s.Reg.regrow()
	var resident, files int64
	for _, h := range s.Reg.serving() {
		resident += h.resident.Load()
		files += h.files
	}
	assert.Zero(t, s.Reg.reserved.Load())
	assert.Equal(t, resident, s.Reg.used())
	assert.Equal(t, files, s.Reg.files.Load())
	assert.LessOrEqual(t, s.Reg.used(), int64(6<<20))
}
