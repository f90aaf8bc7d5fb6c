package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	skipGraphPath = filepath.Join("..", "..", "testdata", "faiss115", "hnsw_flat_l2_skip_storage.faiss")
	skipFvecsPath = filepath.Join("..", "..", "testdata", "faiss115", "hnsw_flat_l2_skip_storage.fvecs")
	skipQueries   = filepath.Join("..", "..", "testdata", "faiss115", "queries.fvecs")
)

// TestSearchSeparateVectors: search --vectors on the graph FAISS 1.15
// wrote without its vectors writes FAISS's ids, and its distances within
// 8 ulps, for every query at ef 16 and 64, in mode full and on every
// memory_efficient backend; on_disk agrees with FAISS's ids at ≥ 0.9.
func TestSearchSeparateVectors(t *testing.T) {
	js, err := os.ReadFile(filepath.Join("..", "..", "testdata", "faiss115", "hnsw_flat_l2_skip_storage.json"))
	require.NoError(t, err)
	var doc struct {
		KNN []struct {
			K        int         `json:"k"`
			EfSearch int         `json:"efSearch"`
			IDs      [][]int64   `json:"ids"`
			Dist     [][]float64 `json:"distances"`
		} `json:"knn"`
	}
	require.NoError(t, json.Unmarshal(js, &doc))
	for _, run := range doc.KNN {
		for _, args := range [][]string{
			{"--mode", "full"}, {"--backend", "mmap"}, {"--backend", "pread"}, {"--backend", "direct"},
			{"--mode", "on_disk", "--guide-dir", t.TempDir()},
		} {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			code, _, errOut := runCLI(append([]string{"search", skipGraphPath, "--queries", skipQueries, "--k", "10",
				"--ef-search", strconv.Itoa(run.EfSearch), "--vectors", skipFvecsPath, "--out", out}, args...)...)
			require.Equal(t, 0, code, "%v: %s", args, errOut)
			f, err := os.Open(out)
			require.NoError(t, err)
			sc := bufio.NewScanner(f)
			qi, agree := 0, 0
			for ; sc.Scan(); qi++ {
				var line struct {
					IDs  []int64   `json:"ids"`
					Dist []float64 `json:"distances"`
				}
				require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
				if args[1] == "on_disk" {
					for _, id := range line.IDs {
						for _, w := range run.IDs[qi] {
							if id == w {
								agree++
							}
						}
					}
					continue
				}
				require.Equal(t, run.IDs[qi], line.IDs, "%v ef %d query %d", args, run.EfSearch, qi)
				for j, d := range line.Dist {
					a, b := math.Float32bits(float32(d)), math.Float32bits(float32(run.Dist[qi][j]))
					require.LessOrEqual(t, max(a, b)-min(a, b), uint32(8), "%v ef %d query %d rank %d", args, run.EfSearch, qi, j)
				}
			}
			f.Close()
			require.Equal(t, 50, qi)
			if args[1] == "on_disk" {
				assert.GreaterOrEqual(t, float64(agree)/500, 0.9, "on_disk ef %d", run.EfSearch)
			}
		}
	}
}

// TestSeparateVectorsCLIErrors: search without --vectors, with a vector
// file of another count, or a missing one, is a clear error naming the
// file; inspect --vectors checks the file and says it fits; bench takes
// --vectors.
func TestSeparateVectorsCLIErrors(t *testing.T) {
	code, _, errOut := runCLI("search", skipGraphPath, "--queries", skipQueries, "--k", "10")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "the vectors were left out of this file (IO_FLAG_SKIP_STORAGE); give them with --vectors")

	code, _, errOut = runCLI("search", skipGraphPath, "--queries", skipQueries, "--k", "10", "--vectors", skipQueries)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, skipQueries+" holds 50 vectors, the graph "+skipGraphPath+" has 2000")

	missing := filepath.Join(t.TempDir(), "none.fvecs")
	code, _, errOut = runCLI("search", skipGraphPath, "--queries", skipQueries, "--k", "10", "--vectors", missing)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, missing)

	code, out, errOut := runCLI("inspect", skipGraphPath, "--vectors", skipFvecsPath, "--json")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Missing *json.RawMessage `json:"vectors_missing"`
		Vectors struct {
			File   string `json:"file"`
			Format string `json:"format"`
			Count  int64  `json:"count"`
			D      int    `json:"d"`
			OK     bool   `json:"ok"`
		} `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Nil(t, rep.Missing)
	assert.Equal(t, skipFvecsPath, rep.Vectors.File)
	assert.Equal(t, "fvecs", rep.Vectors.Format)
	assert.Equal(t, int64(2000), rep.Vectors.Count)
	assert.Equal(t, 32, rep.Vectors.D)
	assert.True(t, rep.Vectors.OK)

	code, _, errOut = runCLI("inspect", skipGraphPath, "--vectors", skipQueries)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, skipQueries+" holds 50 vectors")

	code, out, errOut = runCLI("bench", skipGraphPath, "--queries", skipQueries, "--k", "10", "--vectors", skipFvecsPath,
		"--max-queries", "50", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "qps")
}
