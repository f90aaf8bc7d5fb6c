package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// TestExportVectorsLayouts: export-vectors writes packed records for small
// vectors unless asked for aligned ones, says which, how many bytes and
// why; both files round-trip the vectors and serve the same answers as
// rerank vectors and as a graph's separate vectors.
func TestExportVectorsLayouts(t *testing.T) {
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss") // 400 × 20
	q := filepath.Join(readmeRoot, "testdata/queries/opensearch_0_165_vec.fvecs")
	dir := t.TempDir()
	files := map[string]string{}
	for layout, want := range map[string]string{
		"":        " → OUT: 36096 bytes, layout packed, records of 80 bytes back to back (aligned for O_DIRECT they would be 4096 bytes each, 51.2× the data: --layout aligned)\n",
		"packed":  " → OUT: 36096 bytes, layout packed, records of 80 bytes back to back",
		"aligned": " → OUT: 1642496 bytes, layout aligned, records of 4096 bytes on 4096-byte boundaries for O_DIRECT reads (one block a vector; 51.2× the vectors' 80 bytes)\n",
	} {
		out := filepath.Join(dir, "v-"+layout+".vec")
		args := []string{"export-vectors", idx, out}
		if layout != "" {
			args = append(args, "--layout", layout)
		}
		code, stdout, stderr := runCLI(args...)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, idx+": 400 vectors of dimension 20"+strings.Replace(want, "OUT", out, 1), layout)
		fi, err := os.Stat(out)
		require.NoError(t, err)
		assert.Contains(t, stdout, ": "+strconv.FormatInt(fi.Size(), 10)+" bytes", "the size said is the size written")
		files[layout] = out
	}
	a, err := os.ReadFile(files[""])
	require.NoError(t, err)
	b, err := os.ReadFile(files["packed"])
	require.NoError(t, err)
	assert.Equal(t, a, b, "auto is packed at d=20")

	// Both hold the index's vectors, bit for bit.
	src, err := rerank.Open(idx, "pread")
	require.NoError(t, err)
	defer src.Close()
	labels := make([]int32, 400)
	for i := range labels {
		labels[i] = int32(i)
	}
	want := make([]float32, 400*20)
	require.NoError(t, src.Fetch(labels, want, nil))
	for _, layout := range []string{"packed", "aligned"} {
		for _, strat := range []string{"pread", "direct", "mmap"} {
			s, err := rerank.Open(files[layout], strat)
			require.NoError(t, err, layout)
			got := make([]float32, 400*20)
			require.NoError(t, s.Fetch(labels, got, nil), "%s %s", layout, strat)
			assert.Equal(t, want, got, "%s %s", layout, strat)
			s.Close()
		}
	}

	// The same answers as rerank vectors, on every strategy.
	var first string
	for _, layout := range []string{"packed", "aligned"} {
		for _, strat := range []string{"pread", "direct"} {
			code, out, stderr := runCLI("search", idx, "--queries", q, "--k", "10", "--rerank-vectors", files[layout], "--rerank-strategy", strat)
			require.Equal(t, 0, code, stderr)
			require.NotEmpty(t, out)
			if first == "" {
				first = out
			}
			assert.Equal(t, first, out, "%s %s", layout, strat)
		}
	}

	// And as the separate vectors of a graph written without them.
	var sep string
	for _, layout := range []string{"packed", "aligned"} {
		out := filepath.Join(dir, "skip-"+layout+".vec")
		code, _, stderr := runCLI("export-vectors", skipFvecsPath, out, "--layout", layout)
		require.Equal(t, 0, code, stderr)
		code, res, stderr := runCLI("search", skipGraphPath, "--vectors", out, "--queries", skipQueries, "--k", "10", "--backend", "direct")
		require.Equal(t, 0, code, stderr)
		if sep == "" {
			sep = res
		}
		assert.Equal(t, sep, res, layout)
	}
	code, res, stderr := runCLI("search", skipGraphPath, "--vectors", skipFvecsPath, "--queries", skipQueries, "--k", "10", "--backend", "direct")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, sep, res, "the .fvecs the .vec files came from")

	code, _, stderr = runCLI("export-vectors", idx, filepath.Join(dir, "x.vec"), "--layout", "tight")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown --layout "tight" (want auto, aligned or packed)`)
}
