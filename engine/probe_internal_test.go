package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenReusesProbe: Plan.Open takes Prepare's parse when the file is
// unchanged, and parses again when it was replaced in between.
func TestOpenReusesProbe(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.faiss")
	copyFixture := func(name string) {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path+".tmp", b, 0o644))
		require.NoError(t, os.Rename(path+".tmp", path))
	}
	copyFixture("hnsw_flat_l2.faiss")
	p, err := Prepare(Spec{Path: path})
	require.NoError(t, err)
	x, err := p.Open()
	require.NoError(t, err)
	assert.Same(t, p.probe, x.file, "unchanged file: the probe's parse is reused")
	x.Close()

	p, err = Prepare(Spec{Path: path})
	require.NoError(t, err)
	copyFixture("hnsw_flat_large.faiss")
	later := time.Now().Add(time.Second)
	require.NoError(t, os.Chtimes(path, later, later))
	x, err = p.Open()
	require.NoError(t, err)
	defer x.Close()
	assert.NotSame(t, p.probe, x.file, "replaced file: parsed again")
	assert.NotEqual(t, p.probe.Graph.NTotal, x.file.Graph.NTotal)
	assert.Equal(t, x.file.Graph.NTotal, x.idx.NTotal(), "the index serves the file it opened")
}
