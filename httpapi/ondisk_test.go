package httpapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// TestOnDiskREST: an index loads in mode on_disk with a compression, its
// guide is written to the server's guide_dir and shown in GET, searches
// return FAISS's exact neighbours with exact distances and a profile of
// guide distances and rerank reads, and a live switch goes from
// memory_efficient to on_disk and back while queries keep succeeding.
func TestOnDiskREST(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "testdata", "ondisk"))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "clustered_l2.json"))
	require.NoError(t, err)
	var fx struct {
		Queries [][]float64 `json:"queries"`
		Exact   struct {
			IDs  [][]int64   `json:"ids"`
			Dist [][]float64 `json:"distances"`
		} `json:"exact"`
	}
	require.NoError(t, json.Unmarshal(raw, &fx))
	guides := t.TempDir()
	_, ts := newTestServer(t, Config{DataRoots: []string{root}, GuideDir: guides})
	realRoot, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	guidePath := func(level string) string {
		return engine.GuidePath(guides, filepath.Join(realRoot, "clustered_l2.faiss"), level)
	}
	query := func(i int) string {
		b, _ := json.Marshal(fx.Queries[i])
		return fmt.Sprintf(`{"vector":%s,"k":10,"method_parameters":{"ef_search":64},"profile":true}`, b)
	}

	r := call(t, ts, "PUT", "/indexes/c", `{"path":"clustered_l2.faiss","mode":"on_disk","compression":"4x"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "on_disk", r.Body["mode"])
	assert.Equal(t, "4x", r.Body["compression"])
	guide, _ := r.Body["guide"].(map[string]any)
	require.NotNil(t, guide, r.Raw)
	assert.Equal(t, "guide_dir/"+filepath.Base(guidePath("4x")), guide["path"], "the guide as the client names it")
	assert.FileExists(t, guidePath("4x"))
	assert.Positive(t, guide["bytes"])

	var hitsOK int
	for i := range fx.Queries {
		r := call(t, ts, "POST", "/indexes/c/_search", query(i))
		require.Equal(t, 200, r.Status, r.Raw)
		hits := r.Body["hits"].([]any)
		require.Len(t, hits, 10)
		top := hits[0].(map[string]any)
		if int64(top["id"].(float64)) == fx.Exact.IDs[i][0] {
			hitsOK++
			assert.InDelta(t, fx.Exact.Dist[i][0], top["distance"], 1e-3*max(1, fx.Exact.Dist[i][0]), "exact distance, query %d", i)
		}
		prof := r.Body["profile"].(map[string]any)
		assert.Positive(t, prof["guide_distances"], "query %d: the walk ran on the guide", i)
		assert.Equal(t, prof["ndis"], prof["guide_distances"])
		require.NotNil(t, prof["rerank"], "query %d: reranked", i)
	}
	assert.GreaterOrEqual(t, hitsOK, len(fx.Queries)*9/10, "the nearest neighbour (FAISS's exact search) comes first")

	// Switch to memory_efficient, back to on_disk at 32x, then to 8x while
	// clients query: every query answers 200.
	var stop atomic.Bool
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if r := call(t, ts, "POST", "/indexes/c/_search", query(i%len(fx.Queries))); r.Status != 200 {
					failed.Add(1)
				}
			}
		})
	}
	r = call(t, ts, "PUT", "/indexes/c/_mode", `{"mode":"memory_efficient"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Nil(t, r.Body["guide"])
	assert.Nil(t, r.Body["rerank"], "on_disk's own rerank source went with it")
	r = call(t, ts, "PUT", "/indexes/c/_mode", `{"mode":"on_disk","compression":"32x"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "32x", r.Body["compression"])
	r = call(t, ts, "PUT", "/indexes/c/_mode", `{"mode":"on_disk","compression":"8x"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "8x", r.Body["compression"])
	guide, _ = r.Body["guide"].(map[string]any)
	require.NotNil(t, guide, r.Raw)
	assert.Equal(t, "guide_dir/"+filepath.Base(guidePath("8x")), guide["path"], "the guide as the client names it")
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, failed.Load(), "queries failed during the switches")
	assert.FileExists(t, guidePath("32x"))

	// Refusals.
	for _, c := range []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"PUT", "/indexes/d", `{"path":"clustered_l2.faiss","mode":"on_disk","compression":"3x"}`, 400, `unknown compression \"3x\" (known: auto, 4x, 5x, 6x, 8x, 16x, 32x)`},
		{"PUT", "/indexes/d", `{"path":"clustered_l2.faiss","compression":"4x"}`, 400, "compression applies to mode on_disk"},
		{"PUT", "/indexes/d", `{"path":"clustered_l2.faiss","mode":"on_disk","memory_budget":65536}`, 400, "needs a guide of"},
		{"PUT", "/indexes/c/_mode", `{"compression":"9x"}`, 400, `unknown compression \"9x\"`},
		{"PUT", "/indexes/c/_mode", `{"mode":"full","compression":"4x"}`, 400, "compression applies to mode on_disk"},
		{"PUT", "/indexes/d", `{"path":"clustered_l2.faiss","mode":"on_disk","compression":"` + strings.Repeat("x", 5000) + `"}`, 400, `xxxxxxxxxxxxxxxx…`},
		{"PUT", "/indexes/d", `{"path":"clustered_l2.faiss","memory_budget":9223372036854775807}`, 400, "above the largest budget"},
		{"POST", "/indexes/c/_search", `{"vector":[` + strings.Repeat("0,", 31) + `0],"k":3,"rescore":{"oversample_factor":-1}}`, 400, "oversample_factor -1 is negative"},
		{"PUT", "/indexes/d", `{"path":"clustered_l2.faiss","rerank":{"oversample_factor":2}}`, 400, "rerank.vectors_path is required in mode memory_efficient"},
	} {
		r := call(t, ts, c.method, c.path, c.body)
		assert.Equal(t, c.status, r.Status, "%s %.80s: %.300s", c.method, c.body, r.Raw)
		assert.Contains(t, r.Raw, c.msg, "%.80s", c.body)
		assert.Less(t, len(r.Raw), 2000, "a long value is not echoed whole")
	}
	assert.Equal(t, 200, call(t, ts, "POST", "/indexes/c/_search", query(0)).Status, "the index still serves")

	// on_disk's rerank without a vectors_path rescores from the index's own
	// vectors, with the oversample given.
	r = call(t, ts, "PUT", "/indexes/e", `{"path":"clustered_l2.faiss","mode":"on_disk","compression":"32x","rerank":{"oversample_factor":4}}`)
	require.Equal(t, 200, r.Status, r.Raw)
	rr, _ := r.Body["rerank"].(map[string]any)
	require.NotNil(t, rr, r.Raw)
	assert.Equal(t, "clustered_l2.faiss", rr["vectors_path"], r.Raw)
	assert.EqualValues(t, 4, rr["oversample_factor"])
	assert.Equal(t, 200, call(t, ts, "POST", "/indexes/e/_search", query(0)).Status)
}
