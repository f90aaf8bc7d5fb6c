package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
)

// TestSeparateVectorsREST: "vectors_path" in the load body serves the
// graph FAISS 1.15 wrote without its vectors: FAISS's ids and distances
// (within 8 ulps) at ef 64 in mode full and on every memory_efficient
// backend, and on_disk agreeing with FAISS's ids at ≥ 0.9; without
// vectors_path, with a vector file of another count, or one outside the
// data roots, the load fails with a message naming the file.
func TestSeparateVectorsREST(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "testdata", "faiss115"))
	require.NoError(t, err)
	js, err := os.ReadFile(filepath.Join(root, "hnsw_flat_l2_skip_storage.json"))
	require.NoError(t, err)
	var doc struct {
		KNN []struct {
			EfSearch int         `json:"efSearch"`
			IDs      [][]int64   `json:"ids"`
			Dist     [][]float64 `json:"distances"`
		} `json:"knn"`
	}
	require.NoError(t, json.Unmarshal(js, &doc))
	run := doc.KNN[1]
	require.Equal(t, 64, run.EfSearch)
	q, err := vecio.ReadFile(filepath.Join(root, "queries.fvecs"))
	require.NoError(t, err)
	_, ts := newTestServer(t, Config{DataRoots: []string{root}, GuideDir: t.TempDir()})

	for _, body := range []string{
		`"mode":"full"`, `"backend":"mmap"`, `"backend":"pread"`, `"backend":"direct"`, `"mode":"on_disk","compression":"4x"`,
	} {
		r := call(t, ts, "PUT", "/indexes/s", `{"path":"hnsw_flat_l2_skip_storage.faiss","vectors_path":"hnsw_flat_l2_skip_storage.fvecs",`+body+`}`)
		require.Equal(t, 200, r.Status, r.Raw)
		assert.Equal(t, "hnsw_flat_l2_skip_storage.fvecs", r.Body["vectors_path"], r.Raw)
		agree := 0
		for i := range q.N {
			v, _ := json.Marshal(q.RowF32(i))
			r := call(t, ts, "POST", "/indexes/s/_search", fmt.Sprintf(`{"vector":%s,"k":10,"method_parameters":{"ef_search":64}}`, v))
			require.Equal(t, 200, r.Status, r.Raw)
			hits := r.Body["hits"].([]any)
			require.Len(t, hits, 10)
			for j, h := range hits {
				hm := h.(map[string]any)
				id := int64(hm["id"].(float64))
				if body == `"mode":"on_disk","compression":"4x"` {
					for _, w := range run.IDs[i] {
						if w == id {
							agree++
						}
					}
					continue
				}
				require.Equal(t, run.IDs[i][j], id, "%s query %d rank %d", body, i, j)
				a, b := math.Float32bits(float32(hm["distance"].(float64))), math.Float32bits(float32(run.Dist[i][j]))
				require.LessOrEqual(t, max(a, b)-min(a, b), uint32(8), "%s query %d rank %d", body, i, j)
			}
		}
		if body == `"mode":"on_disk","compression":"4x"` {
			assert.GreaterOrEqual(t, float64(agree)/float64(10*q.N), 0.9)
		}
		require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/s", "").Status)
	}

	r := call(t, ts, "PUT", "/indexes/e", `{"path":"hnsw_flat_l2_skip_storage.faiss"}`)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "hnsw_flat_l2_skip_storage.faiss: the vectors were left out of this file (IO_FLAG_SKIP_STORAGE); give them with vectors_path")

	r = call(t, ts, "PUT", "/indexes/e", `{"path":"hnsw_flat_l2_skip_storage.faiss","vectors_path":"queries.fvecs"}`)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "queries.fvecs holds 50 vectors, the graph hnsw_flat_l2_skip_storage.faiss has 2000")

	r = call(t, ts, "PUT", "/indexes/e", `{"path":"hnsw_flat_l2_skip_storage.faiss","vectors_path":"/etc/passwd"}`)
	assert.Equal(t, 403, r.Status, r.Raw)
}
