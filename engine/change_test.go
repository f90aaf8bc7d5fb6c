package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// TestChangeApply: the switch rules. A backend belongs to its mode; a
// budget to its backend; unset fields keep their values.
func TestChangeApply(t *testing.T) {
	base := engine.Spec{Path: "x.faiss", Mode: "memory_efficient", Backend: "pread", CacheBytes: 1 << 20, Semantics: "faiss-1.7.3", EfSearch: 40}
	for _, c := range []struct {
		name   string
		from   engine.Spec
		change engine.Change
		want   engine.Spec
	}{
		{"nothing", base, engine.Change{}, base},
		{"to full drops the backend", base, engine.Change{Mode: "full"},
			engine.Spec{Path: "x.faiss", Mode: "full", CacheBytes: 1 << 20, Semantics: "faiss-1.7.3", EfSearch: 40}},
		{"back from full drops memory", engine.Spec{Mode: "full", Backend: "memory"}, engine.Change{Mode: "memory_efficient"},
			engine.Spec{Mode: "memory_efficient"}},
		{"a new backend drops the budget", engine.Spec{Mode: "memory_efficient", Backend: "direct", MemoryBudget: 1 << 30},
			engine.Change{Backend: "mmap"}, engine.Spec{Mode: "memory_efficient", Backend: "mmap"}},
		{"a budget with its backend stays", engine.Spec{Mode: "memory_efficient", Backend: "mmap"},
			engine.Change{Backend: "direct", MemoryBudget: 1 << 30}, engine.Spec{Mode: "memory_efficient", Backend: "direct", MemoryBudget: 1 << 30}},
		{"full drops the budget", engine.Spec{Mode: "memory_efficient", MemoryBudget: 1 << 30}, engine.Change{Mode: "full"},
			engine.Spec{Mode: "full"}},
		{"ef -1 is the file's", base, engine.Change{EfSearch: -1},
			engine.Spec{Path: "x.faiss", Mode: "memory_efficient", Backend: "pread", CacheBytes: 1 << 20, Semantics: "faiss-1.7.3"}},
		{"kernel", base, engine.Change{Kernel: "exact"},
			engine.Spec{Path: "x.faiss", Mode: "memory_efficient", Backend: "pread", CacheBytes: 1 << 20, Semantics: "faiss-1.7.3", EfSearch: 40, Kernel: "exact"}},
	} {
		assert.Equal(t, c.want, c.change.Apply(c.from), c.name)
	}
	assert.False(t, engine.Change{Mode: "full", Backend: "x", MemoryBudget: 1}.ChangesResults(base))
	assert.True(t, engine.Change{Kernel: "exact"}.ChangesResults(base))
	assert.True(t, engine.Change{EfSearch: -1}.ChangesResults(base))
	assert.True(t, engine.Change{Mode: engine.ModeOnDisk}.ChangesResults(base), "into on_disk")
	onDisk := engine.Change{Mode: engine.ModeOnDisk, Compression: "4x"}.Apply(base)
	assert.Equal(t, "4x", onDisk.Compression)
	assert.True(t, engine.Change{Compression: "32x"}.ChangesResults(onDisk), "another guide")
	assert.False(t, engine.Change{MemoryBudget: 1 << 30}.ChangesResults(onDisk))
	back := engine.Change{Mode: "memory_efficient"}.Apply(onDisk)
	assert.Empty(t, back.Compression, "leaving on_disk drops the compression")
	assert.True(t, engine.Change{Mode: "memory_efficient"}.ChangesResults(onDisk), "out of on_disk")
}

// TestCAGRASeedReachesTheSearch: Spec.CAGRASeed is the search's seed.
func TestCAGRASeedReachesTheSearch(t *testing.T) {
	x, _, err := engine.Open(engine.Spec{Path: filepath.Join("..", "testdata", "faiss115", "hnsw_cagra_l2.faiss"), CAGRASeed: 7})
	require.NoError(t, err)
	defer x.Close()
	assert.Equal(t, uint64(7), x.Options().CAGRASeed)
}
