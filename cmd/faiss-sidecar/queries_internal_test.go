package main

import (
	"flag"
	"io"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
)

// TestReadQueriesPlansBeside: the queries a command reads before opening
// its index mark the spec as a one-index caller's (MachineBudget) and are
// counted beside the index, as many rows as were asked for; a usage error
// comes before the file is read.
func TestReadQueriesPlansBeside(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "queries", "opensearch_0_165_vec.fvecs")
	all, err := vecio.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, all.N, 3)
	var f indexFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	require.NoError(t, fs.Parse([]string{"--mode", "on_disk"}))
	m, err := f.readQueries(path, 3)
	require.NoError(t, err)
	assert.Equal(t, 3, m.N)
	spec := f.spec("x.faiss", nil)
	assert.True(t, spec.MachineBudget)
	assert.Equal(t, int64(4*3*all.Dim), spec.Beside)

	// An explicit --memory-budget, 0 included, is the budget: none from
	// the machine.
	for _, v := range []string{"0", "1000000"} {
		var g indexFlags
		fs = flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		g.register(fs)
		require.NoError(t, fs.Parse([]string{"--mode", "on_disk", "--memory-budget", v}))
		_, err = g.readQueries(path, 3)
		require.NoError(t, err)
		spec = g.spec("x.faiss", nil)
		assert.False(t, spec.MachineBudget, v)
		assert.Equal(t, v, strconv.FormatInt(spec.MemoryBudget, 10))
	}

	var bad indexFlags
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bad.register(fs)
	require.NoError(t, fs.Parse([]string{"--cache-bytes", "-1"}))
	_, err = bad.readQueries(filepath.Join(t.TempDir(), "missing.fvecs"), 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--cache-bytes -1 is negative")
	assert.False(t, bad.machine)
}
