package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
)

// TestPrepareThenQueries: a command prepares its index (the engine's
// refusals first) with the spec marked as a one-index caller's
// (MachineBudget), then reads its queries, counted beside the index as
// many rows as were asked for; an explicit --memory-budget, 0 included,
// is the budget and asks for none from the machine; a usage error comes
// before any file is read.
func TestPrepareThenQueries(t *testing.T) {
	index := filepath.Join("..", "..", "testdata", "fixtures", "opensearch_0_165_vec.faiss")
	path := filepath.Join("..", "..", "testdata", "queries", "opensearch_0_165_vec.fvecs")
	all, err := vecio.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, all.N, 3)
	flags := func(args ...string) *indexFlags {
		var f indexFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		require.NoError(t, fs.Parse(args))
		return &f
	}
	f := flags("--mode", "on_disk", "--guide-dir", t.TempDir())
	pi, m, err := f.prepareWithQueries(index, path, 3, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, m.N)
	spec := f.spec(index, nil)
	assert.True(t, spec.MachineBudget)
	assert.Equal(t, int64(4*3*all.Dim), spec.Beside)
	l, qs, err := f.openFor(pi, path, m)
	require.NoError(t, err)
	assert.Len(t, qs, 3)
	l.Close()

	for _, v := range []string{"0", "1000000"} {
		g := flags("--mode", "on_disk", "--memory-budget", v)
		g.machine = true // as prepare marks it
		spec = g.spec(index, nil)
		assert.False(t, spec.MachineBudget, v)
		assert.Equal(t, v, strconv.FormatInt(spec.MemoryBudget, 10))
	}

	bad := flags("--cache-bytes", "-1")
	_, err = bad.prepare(filepath.Join(t.TempDir(), "missing.faiss"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--cache-bytes -1 is negative")
}

// TestQueryDimBeforeGuide: float queries of another dimension are refused
// before the index opens: an on_disk first run builds no guide for them.
func TestQueryDimBeforeGuide(t *testing.T) {
	index := filepath.Join("..", "..", "testdata", "fixtures", "opensearch_0_165_vec.faiss")
	dir := t.TempDir()
	q := filepath.Join(dir, "q3.fvecs")
	row := []byte{3, 0, 0, 0, 0, 0, 128, 63, 0, 0, 128, 63, 0, 0, 128, 63} // dimension 3: 1, 1, 1
	require.NoError(t, os.WriteFile(q, row, 0o644))
	guides := filepath.Join(dir, "guides")
	for _, cmd := range []string{"bench", "search"} {
		code, _, stderr := runCLI(cmd, index, "--queries", q, "--k", "1", "--mode", "on_disk", "--guide-dir", guides)
		assert.Equal(t, 1, code, cmd)
		assert.Contains(t, stderr, "queries have 3 values, the index expects 20 components", cmd)
		_, err := os.Stat(guides)
		assert.True(t, os.IsNotExist(err), "%s: no guide built", cmd)
	}
}
