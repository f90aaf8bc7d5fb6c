package httpapi

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOnDiskNodeRoom: an on_disk index loaded without a memory_budget is
// planned without one while the node's free memory holds its file and
// guide, and under that free memory when it does not, a refusal saying so.
// What is free counts what caches would give back down to cacheFloor.
func TestOnDiskNodeRoom(t *testing.T) {
	fixtures, err := filepath.Abs(filepath.Join("..", "testdata", "fixtures"))
	require.NoError(t, err)
	ondisk, err := filepath.Abs(filepath.Join("..", "testdata", "ondisk"))
	require.NoError(t, err)
	// clustered_l2.faiss is 417,554 bytes: with its 4x guide, 521,942. Its
	// least on_disk budget is about 5.3 MB (two workers' scratch).
	const node = 1_800_000
	s, ts := newTestServer(t, Config{DataRoots: []string{ondisk, fixtures}, GuideDir: t.TempDir(), MemoryBudget: node})
	od := `{"path":"` + filepath.Join(ondisk, "clustered_l2.faiss") + `","mode":"on_disk"}`

	r := call(t, ts, "PUT", "/indexes/c", od)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Nil(t, r.Body["memory_budget"], "the node holds the file and its guide: no budget")
	assert.Equal(t, "mmap", r.Body["backend"])
	require.NoError(t, s.Reg.Delete("c", time.Second))

	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/a", `{"path":"`+filepath.Join(fixtures, "hnsw_flat_large.faiss")+`","mode":"full"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/b", `{"path":"`+filepath.Join(fixtures, "hnsw_flat_l2.faiss")+`","mode":"full"}`).Status)
	used, _ := s.Reg.usage()
	room := node - used
	require.Less(t, room, int64(521_942), "the node has too little left for the file and its guide")
	assert.Equal(t, room, s.Reg.room())
	r = call(t, ts, "PUT", "/indexes/c", od)
	require.Equal(t, 429, r.Status, r.Raw)
	assert.Equal(t, "memory_budget_exceeded", r.Body["error"].(map[string]any)["type"])
	assert.Contains(t, r.Raw, fmt.Sprintf("and the budget is %d (none was set: the %d bytes of the node's memory budget no other index holds)", room, room))

	// A node whose whole budget is under on_disk's least: it never fits, a 400.
	_, tiny := newTestServer(t, Config{DataRoots: []string{ondisk}, GuideDir: t.TempDir(), MemoryBudget: 400_000})
	r = call(t, tiny, "PUT", "/indexes/c", od)
	require.Equal(t, 400, r.Status, r.Raw)
	assert.Equal(t, "memory_budget_exceeded", r.Body["error"].(map[string]any)["type"])
	assert.Contains(t, r.Raw, "the 400000 bytes of the node's memory budget")

	// A cache gives back all but cacheFloor.
	s, ts = newTestServer(t, Config{DataRoots: []string{fixtures}, MemoryBudget: 4 << 20})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/m", `{"path":"hnsw_flat_large.faiss","backend":"pread","cache_bytes":1500000}`).Status)
	used, _ = s.Reg.usage()
	cache := s.Reg.get("m").cur.Load().x.Cache().Budget()
	require.Greater(t, cache, int64(cacheFloor))
	assert.Equal(t, 4<<20-used+cache-cacheFloor, s.Reg.room())
}

// TestRefusedLoadShrinksNothing: a load that would not fit even with every
// cache down to cacheFloor is refused without shrinking any (a cache shrunk
// for a refused load stayed small for its index's life).
func TestRefusedLoadShrinksNothing(t *testing.T) {
	s, ts := newTestServer(t, Config{MemoryBudget: 2_000_000})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/a", `{"path":"hnsw_flat_large.faiss","backend":"pread","cache_bytes":2097152}`).Status)
	before := s.Reg.get("a").cur.Load().x.Cache().Budget()
	require.Greater(t, before, int64(cacheFloor))
	r := call(t, ts, "PUT", "/indexes/b", `{"path":"hnsw_flat_large.faiss","mode":"full"}`)
	require.Equal(t, 429, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "their caches could give back only")
	assert.Equal(t, before, s.Reg.get("a").cur.Load().x.Cache().Budget(), "a's cache is as it was")
}

// TestOnDiskSpareGivenBack: an on_disk index with an exact guide makes no
// vector cache, and what its memory_budget planned for one is the node's
// again: the index is charged what it holds.
func TestOnDiskSpareGivenBack(t *testing.T) {
	const node, budget = 64 << 20, 16 << 20
	s, ts := newTestServer(t, Config{GuideDir: t.TempDir(), MemoryBudget: node})
	r := call(t, ts, "PUT", "/indexes/e", fmt.Sprintf(`{"path":"hnsw_ties_l2.faiss","mode":"on_disk","compression":"4x","memory_budget":%d}`, budget))
	require.Equal(t, 200, r.Status, r.Raw)
	resident := int64(r.Body["resident_bytes"].(float64))
	assert.Less(t, resident, int64(budget/2), "charged what it holds, not the budget")
	assert.Equal(t, float64(budget), r.Body["memory_budget"].(map[string]any)["budget_bytes"], "the budget asked for is shown")
	used, _ := s.Reg.usage()
	assert.Equal(t, resident, used)
	assert.Equal(t, int64(node)-resident, s.Reg.room())
}

// TestCachesGrowBack: caches shrunk to make room for a load grow back to
// their size at open once that index is deleted, within what is free.
func TestCachesGrowBack(t *testing.T) {
	s, ts := newTestServer(t, Config{MemoryBudget: 2_400_000})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/a", `{"path":"hnsw_flat_large.faiss","backend":"pread","cache_bytes":2097152}`).Status)
	cache := func() int64 { return s.Reg.get("a").cur.Load().x.Cache().Budget() }
	resident := func() int64 { return s.Reg.get("a").cur.Load().resident.Load() }
	planned, held := cache(), resident()
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/b", `{"path":"hnsw_flat_large.faiss","mode":"full"}`).Status)
	require.Less(t, cache(), planned, "shrunk for b")
	require.Less(t, resident(), held)
	for i := range 2 { // searches go on with the small cache, and after
		r := call(t, ts, "POST", "/indexes/a/_search", `{"vector":`+vectorJSON(make([]float64, 64))+`,"k":3}`)
		require.Equal(t, 200, r.Status, "%d: %s", i, r.Raw)
	}
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/b", ``).Status)
	assert.Equal(t, planned, cache(), "grown back")
	assert.Equal(t, held, resident())
	used, _ := s.Reg.usage()
	assert.Equal(t, held, used)
	r := call(t, ts, "POST", "/indexes/a/_search", `{"vector":`+vectorJSON(make([]float64, 64))+`,"k":3}`)
	require.Equal(t, 200, r.Status, r.Raw)
}

// TestSwitchNeverFits: a switch whose new mode cannot fit beside the one it
// replaces even on an otherwise empty node (and with the old one's caches
// at the floor) is a 400, not a 429 to retry for ever; the index serves on.
func TestSwitchNeverFits(t *testing.T) {
	_, ts := newTestServer(t, Config{MemoryBudget: 2_400_000})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/a", `{"path":"hnsw_flat_large.faiss","mode":"full"}`).Status)
	r := call(t, ts, "PUT", "/indexes/a/_mode", `{"ef_search":32}`)
	require.Equal(t, 400, r.Status, r.Raw)
	assert.Equal(t, "memory_budget_exceeded", r.Body["error"].(map[string]any)["type"])
	assert.Contains(t, r.Raw, "beside the 1202617 the current one holds")
	// With a pread cache the old mode can give back, the same switch fits.
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/a", ``).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/a", `{"path":"hnsw_flat_large.faiss","backend":"pread","cache_bytes":1500000}`).Status)
	r = call(t, ts, "PUT", "/indexes/a/_mode", `{"mode":"full"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, 200, call(t, ts, "POST", "/indexes/a/_search", `{"vector":`+vectorJSON(make([]float64, 64))+`,"k":3}`).Status)
}
