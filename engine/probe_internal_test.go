package engine

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/quant"
)

// TestOpenReusesProbe: Plan.Open takes Prepare's parse when the file is
// unchanged, and parses again when it changed in between (rewritten in
// place: the open file holds other bytes). A file replaced at its path in
// between (a rename) is not looked up again: the load serves the file it
// opened and probed, and its file check then says the path was replaced.
func TestOpenReusesProbe(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.faiss")
	fixture := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", name))
		require.NoError(t, err)
		return b
	}
	replace := func(name string) {
		require.NoError(t, os.WriteFile(path+".tmp", fixture(name), 0o644))
		require.NoError(t, os.Rename(path+".tmp", path))
	}
	replace("hnsw_flat_l2.faiss")
	p, err := Prepare(Spec{Path: path})
	require.NoError(t, err)
	x, err := p.Open()
	require.NoError(t, err)
	assert.Same(t, p.probe, x.file, "unchanged file: the probe's parse is reused")
	x.Close()

	p, err = Prepare(Spec{Path: path})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, fixture("hnsw_flat_large.faiss"), 0o644)) // the same file, other bytes
	later := time.Now().Add(time.Second)
	require.NoError(t, os.Chtimes(path, later, later))
	x, err = p.Open()
	require.NoError(t, err)
	assert.NotSame(t, p.probe, x.file, "changed file: parsed again")
	assert.NotEqual(t, p.probe.Graph.NTotal, x.file.Graph.NTotal)
	assert.Equal(t, x.file.Graph.NTotal, x.idx.NTotal(), "the index serves the file it opened")
	require.NoError(t, x.CheckFile())
	x.Close()

	p, err = Prepare(Spec{Path: path})
	require.NoError(t, err)
	replace("hnsw_flat_l2.faiss")
	x, err = p.Open()
	require.NoError(t, err)
	defer x.Close()
	assert.Equal(t, p.probe.Graph.NTotal, x.idx.NTotal(), "replaced at its path: the load serves the file it probed")
	assert.ErrorIs(t, x.CheckFile(), ErrFileChanged, "and its check says so")
}

// TestLoadBeyondMemory: a load needing more than the machine's memory is
// refused at Prepare, before any download (mode full of a file larger than
// memory would be killed with every index of the process), saying what it
// needs and how to serve it; memory_efficient of the same file is served.
func TestLoadBeyondMemory(t *testing.T) {
	path := filepath.Join("..", "testdata", "fixtures", "hnsw_flat_large.faiss")
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	machineMemory = func() int64 { return 1 << 20 } // less than the 1.2 MB file
	_, err := Prepare(Spec{Path: path, Mode: "full"})
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), "more than this machine's memory (1048576 bytes")
	assert.Contains(t, err.Error(), "memory_efficient")
	p, err := Prepare(Spec{Path: path, Mode: "memory_efficient", Backend: "mmap"})
	require.NoError(t, err)
	assert.LessOrEqual(t, p.NeedBytes(), int64(1<<20))
}

// TestOnDiskMachineBudget: an on_disk spec without a memory budget, from
// a caller serving that one index (Spec.MachineBudget), is planned without
// one (the finest level, vectors through the page cache) where the
// machine's room less what the caller holds beside holds its files and
// their 4x guide, and under a budget of that room where it does not
// (here, a machine too small for even the smallest guide: refused, naming
// the budget and where it came from). A separate vector file counts; a
// server's spec (no MachineBudget) is planned as ever; a budget larger
// than the machine is refused as such.
func TestOnDiskMachineBudget(t *testing.T) {
	path := filepath.Join("..", "testdata", "fixtures", "hnsw_flat_large.faiss")
	st, err := os.Stat(path)
	require.NoError(t, err)
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	spec := func(beside int64) Spec {
		return Spec{Path: path, Mode: ModeOnDisk, GuideDir: t.TempDir(), Workers: 1, MachineBudget: true, Beside: beside}
	}
	const reserve = 8 << 20 // OwnShare's least: more than a sixteenth of these machines
	need := st.Size() + st.Size()/4
	holds := need + reserve
	machineMemory = func() int64 { return holds }
	p, err := Prepare(spec(0))
	require.NoError(t, err)
	assert.False(t, p.budgetFromMachine())
	assert.Zero(t, p.Spec().MemoryBudget, "the machine holds the file and its guide: no budget")
	assert.Equal(t, quant.Level4x, p.level)
	assert.Equal(t, "mmap", p.Spec().Rerank.Strategy)
	assert.Equal(t, BackendMmap, p.Backend())

	machineMemory = func() int64 { return holds - 1 }
	_, err = Prepare(spec(0))
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), fmt.Sprintf("and the budget is %d (none was set: this machine's memory, %d bytes", need-1, holds-1))
	server := spec(0)
	server.MachineBudget = false
	p, err = Prepare(server)
	require.NoError(t, err, "a server's index: no machine budget")
	assert.Zero(t, p.Spec().MemoryBudget)
	assert.Equal(t, quant.Level4x, p.level)

	// A server's index: the room its node budget has free, in place of the
	// machine's, whatever the caller holds beside.
	room := spec(1 << 40)
	room.Room = need
	p, err = Prepare(room)
	require.NoError(t, err)
	assert.Zero(t, p.Spec().MemoryBudget, "the node's free memory holds the file and its guide: no budget")
	room.Room = need - 1 // planned under it, and this small file's least budget is more
	_, err = Prepare(room)
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), fmt.Sprintf("and the budget is %d (none was set: the %d bytes of the node's memory budget no other index holds)", need-1, need-1))
	room.Room = 1 // the server's "nothing free"
	_, err = Prepare(room)
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), "and the budget is 1 (none was set, and the node's memory budget has none free: other indexes hold it)")

	// What the caller holds beside the index is left to it.
	machineMemory = func() int64 { return 64 << 20 }
	beside := machineRoom(64<<20) - need // the files and guide fit beside it, and no more
	_, err = Prepare(spec(beside + 1))
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), fmt.Sprintf("and the budget is %d (none was set", need-1))
	assert.Contains(t, err.Error(), fmt.Sprintf("the %d bytes its caller holds beside the index", beside+1))
	p, err = Prepare(spec(beside))
	require.NoError(t, err)
	assert.Zero(t, p.Spec().MemoryBudget)
	_, err = Prepare(spec(1 << 40)) // more than the machine: the least budget, refused
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), "and the budget is 1 (none was set")

	// A graph with its vectors in a separate file: both count.
	graph, vecs := filepath.Join("..", "testdata", "faiss115", "hnsw_flat_l2_skip_storage.faiss"), filepath.Join("..", "testdata", "faiss115", "hnsw_flat_l2_skip_storage.fvecs")
	gs, err := os.Stat(graph)
	require.NoError(t, err)
	vs, err := os.Stat(vecs)
	require.NoError(t, err)
	both := gs.Size() + vs.Size()
	machineMemory = func() int64 { return reserve + both + both/4 - 1 }
	_, err = Prepare(Spec{Path: graph, VectorsPath: vecs, Mode: ModeOnDisk, GuideDir: t.TempDir(), Workers: 1, MachineBudget: true})
	require.ErrorIs(t, err, hnswsearch.ErrBudget, "the vector file counts")
	assert.Contains(t, err.Error(), fmt.Sprintf("and the budget is %d", both+both/4-1))

	machineMemory = func() int64 { return holds }
	budget := spec(0)
	budget.MemoryBudget = 64 << 20 // enough for any level, more than the machine
	_, err = Prepare(budget)
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), fmt.Sprintf("a memory budget of %d bytes is more than this machine's memory (%d bytes", 64<<20, holds))

	for m, want := range map[int64]int64{9 << 20: 1 << 20, 256 << 20: 240 << 20, 4 << 30: 4<<30 - 64<<20} {
		assert.Equal(t, want, machineRoom(m), "machineRoom(%d)", m)
	}
}

// TestReplan: a plan made before its caller read its inputs is kept when
// what the caller now holds leaves its machine budget as it was, and made
// anew when it does not (here: the file no longer fits beside the inputs,
// so a budget applies, too small for this machine: refused, naming what
// the caller holds). A spec with a budget of its own is kept.
func TestReplan(t *testing.T) {
	path := filepath.Join("..", "testdata", "fixtures", "hnsw_flat_large.faiss")
	st, err := os.Stat(path)
	require.NoError(t, err)
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	need := st.Size() + st.Size()/4
	machineMemory = func() int64 { return need + 8<<20 } // holds the file and its guide beside OwnShare's least, exactly
	spec := Spec{Path: path, Mode: ModeOnDisk, GuideDir: t.TempDir(), Workers: 1, MachineBudget: true}
	p, err := Prepare(spec)
	require.NoError(t, err)
	same, err := p.Replan(0)
	require.NoError(t, err)
	assert.Same(t, p, same)
	_, err = p.Replan(1)
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), "and the budget is "+fmt.Sprint(need-1))
	assert.Contains(t, err.Error(), "the 1 bytes its caller holds beside the index")

	spec.MemoryBudget = 64 << 20
	machineMemory = func() int64 { return 1 << 40 }
	p, err = Prepare(spec)
	require.NoError(t, err)
	same, err = p.Replan(1 << 39)
	require.NoError(t, err)
	assert.Same(t, p, same, "a budget of its own")
}

// TestBuildMemory: a guide build under a budget may hold what the budget
// leaves beside the guide and the small arrays, growing with the budget:
// a large one keeps the build's default 16 MiB training sample (not the
// plan's heap share, which the index fixes whatever the budget). The
// heap's limit while opening makes room for the build (OpenHeapBytes).
// Without a budget, the build's defaults.
func TestBuildMemory(t *testing.T) {
	defer func(f func() int64) { machineMemory = f }(machineMemory)
	machineMemory = func() int64 { return 1 << 40 } // any budget here fits the machine
	path := filepath.Join("..", "testdata", "fixtures", "hnsw_flat_large.faiss")
	for _, budget := range []int64{0, 64 << 20, 1 << 30} {
		p, err := Prepare(Spec{Path: path, Mode: ModeOnDisk, Compression: "8x", GuideDir: t.TempDir(), Workers: 1, MemoryBudget: budget})
		require.NoError(t, err)
		switch budget {
		case 0:
			assert.Zero(t, p.buildMemory())
			assert.Zero(t, p.OpenHeapBytes())
		default:
			assert.Equal(t, budget-p.guide-p.probe.ResidentBytes(), p.buildMemory(), "budget %d", budget)
			assert.GreaterOrEqual(t, p.buildMemory()/3, int64(16<<20), "budget %d: the whole default sample", budget)
			assert.Equal(t, int64(quant.DefaultBuildBytes), p.OpenHeapBytes(), "budget %d", budget)
			assert.Greater(t, p.OpenHeapBytes(), p.HeapBytes())
		}
	}
}

// TestNotHNSWRefusedFirst: an index without an HNSW graph is refused by
// Prepare in every mode, on_disk included (it dereferenced the missing
// graph), before anything else is read.
func TestNotHNSWRefusedFirst(t *testing.T) {
	path := filepath.Join("..", "testdata", "fixtures", "flat_l2.faiss")
	for _, mode := range []Mode{"full", "memory_efficient", ModeOnDisk} {
		_, err := Prepare(Spec{Path: path, Mode: mode, GuideDir: t.TempDir()})
		require.ErrorIs(t, err, ErrNotServable, mode)
		assert.Contains(t, err.Error(), "has no HNSW graph", mode)
	}
}

// TestCheckFinite: an answer with a distance that JSON cannot spell
// (±Inf, NaN) is refused as a bad request naming the id; finite ones pass,
// and so do their scores.
func TestCheckFinite(t *testing.T) {
	require.NoError(t, checkFinite([]Hit{{ID: 1, Distance: 3.4e38, Score: 1}, {ID: 2, Distance: -5, Score: 6}}))
	for _, space := range []string{"l2", "innerproduct", "cosinesimil", "hamming"} {
		for _, d := range []float32{math.MaxFloat32, -math.MaxFloat32, 0} {
			s := Score(space, d)
			require.False(t, math.IsInf(s, 0) || math.IsNaN(s), "%s score of %v", space, d)
		}
	}
	for _, h := range []Hit{
		{ID: 7, Distance: math.Inf(1), Score: 0},
		{ID: 7, Distance: math.Inf(-1), Score: 0},
		{ID: 7, Distance: math.NaN(), Score: 0},
	} {
		err := checkFinite([]Hit{{ID: 1}, h})
		require.ErrorIs(t, err, ErrBadRequest)
		require.ErrorContains(t, err, "id 7")
	}
}
