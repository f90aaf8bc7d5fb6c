package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// onDiskFixture is testdata/ondisk/NAME.{faiss,queries.fvecs,gt.ivecs}
// (testdata/gen_ondisk.py: FAISS's exact ids and its HNSW recall).
func onDiskFixture(name, ext string) string {
	return filepath.Join("..", "..", "testdata", "ondisk", name+ext)
}

// TestBenchOnDiskContract: `bench … --mode on_disk --compression C
// --guide-dir DIR --json` prints qps, p50_us, p99_us and recall; the first
// run builds the guide in DIR, the next reuses it; recall at ef 64 is at
// least FAISS's own HNSW recall less 0.01 (4x and 8x).
func TestBenchOnDiskContract(t *testing.T) {
	raw, err := os.ReadFile(onDiskFixture("clustered_l2", ".json"))
	require.NoError(t, err)
	var fx struct {
		HNSW []struct {
			EfSearch int     `json:"ef_search"`
			Recall   float64 `json:"recall"`
		} `json:"hnsw"`
	}
	require.NoError(t, json.Unmarshal(raw, &fx))
	for _, level := range []string{"4x", "8x"} {
		dir := t.TempDir()
		args := []string{"bench", onDiskFixture("clustered_l2", ".faiss"), "--queries", onDiskFixture("clustered_l2", ".queries.fvecs"),
			"--gt", onDiskFixture("clustered_l2", ".gt.ivecs"), "--k", "10", "--ef-search", "64", "--threads", "1",
			"--mode", "on_disk", "--compression", level, "--guide-dir", dir, "--max-queries", "50", "--duration", "200ms", "--json"}
		for run := 0; run < 2; run++ {
			code, out, errOut := runCLI(args...)
			require.Equal(t, 0, code, errOut)
			var res map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &res))
			for _, key := range []string{"qps", "p50_us", "p99_us", "recall"} {
				require.Contains(t, res, key)
			}
			assert.Positive(t, res["qps"])
			for _, h := range fx.HNSW {
				if h.EfSearch == 64 {
					assert.GreaterOrEqual(t, res["recall"], h.Recall-0.01, level)
				}
			}
			assert.FileExists(t, engine.GuidePath(dir, onDiskFixture("clustered_l2", ".faiss"), level))
		}
	}
}

// TestQuantize: `quantize` writes the guide an on_disk search then loads
// (no rebuild message), and refuses what on_disk cannot serve.
func TestQuantize(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI("quantize", onDiskFixture("clustered_ip", ".faiss"), "--compression", "32x", "--guide-dir", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "32x guide")
	guide := engine.GuidePath(dir, onDiskFixture("clustered_ip", ".faiss"), "32x")
	assert.FileExists(t, guide)
	st, err := os.Stat(guide)
	require.NoError(t, err)
	code, out, errOut = runCLI("search", onDiskFixture("clustered_ip", ".faiss"), "--queries", onDiskFixture("clustered_ip", ".queries.fvecs"),
		"--k", "5", "--mode", "on_disk", "--compression", "32x", "--guide-dir", dir)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut, "the guide is loaded, not rebuilt")
	assert.Equal(t, 50, strings.Count(out, "\n"), "one line per query")
	st2, err := os.Stat(guide)
	require.NoError(t, err)
	assert.Equal(t, st.ModTime(), st2.ModTime(), "not rewritten")

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"quantize", onDiskFixture("clustered_ip", ".faiss"), "--compression", "7x"}, `unknown compression "7x"`},
		{[]string{"quantize", filepath.Join(fixtures, "bin_hnsw.faiss")}, "float (flat) storage"},
		{[]string{"quantize"}, "usage: faiss-sidecar quantize"},
		{[]string{"search", onDiskFixture("clustered_ip", ".faiss"), "--queries", onDiskFixture("clustered_ip", ".queries.fvecs"), "--k", "5", "--compression", "4x"},
			"compression applies to --mode on_disk"},
	} {
		code, _, errOut := runCLI(c.args...)
		assert.Equal(t, 2, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.msg, "%v", c.args)
	}
}

// TestInspectGuide: inspect describes a guide file (text and JSON); a
// damaged header is an error naming the file.
func TestInspectGuide(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := runCLI("quantize", onDiskFixture("clustered_l2", ".faiss"), "--compression", "4x", "--guide-dir", dir)
	require.Equal(t, 0, code, errOut)
	guide := engine.GuidePath(dir, onDiskFixture("clustered_l2", ".faiss"), "4x")
	code, out, errOut := runCLI("inspect", guide)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "on_disk guide v1, 4x, L2, 2000 vectors of d=32")
	code, _, errOut = runCLI("quantize", onDiskFixture("clustered_l2", ".faiss"), "--compression", "8x", "--guide-dir", dir)
	require.Equal(t, 0, code, errOut)
	code, out8, errOut := runCLI("inspect", engine.GuidePath(dir, onDiskFixture("clustered_l2", ".faiss"), "8x"))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out8, "on_disk guide v2, 8x, L2, 2000 vectors of d=32, 16 bytes a vector")
	assert.NotContains(t, out8, "centroids")
	code, _, errOut = runCLI("quantize", onDiskFixture("clustered_l2", ".faiss"), "--compression", "32x", "--guide-dir", dir)
	require.Equal(t, 0, code, errOut)
	code, out32, errOut := runCLI("inspect", engine.GuidePath(dir, onDiskFixture("clustered_l2", ".faiss"), "32x"), "--json")
	require.Equal(t, 0, code, errOut)
	var info32 map[string]any
	require.NoError(t, json.Unmarshal([]byte(out32), &info32))
	assert.EqualValues(t, 5, info32["version"])
	// 2000 vectors of 22 bytes: the centroids' 32 bytes each take at most
	// an eighth of the rows (171); the cells' shares round down.
	assert.LessOrEqual(t, info32["centroids"], 171.0)
	assert.Greater(t, info32["centroids"], 128.0)
	code, out, errOut = runCLI("inspect", guide, "--json")
	require.Equal(t, 0, code, errOut)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &info))
	assert.Equal(t, "guide", info["kind"])
	assert.Equal(t, "4x", info["compression"])
	assert.EqualValues(t, 2000, info["ntotal"])
	src := info["source"].(map[string]any)
	st, err := os.Stat(onDiskFixture("clustered_l2", ".faiss"))
	require.NoError(t, err)
	assert.EqualValues(t, st.Size(), src["size"])

	b, err := os.ReadFile(guide)
	require.NoError(t, err)
	b[20] ^= 0xff // inside the checked header
	require.NoError(t, os.WriteFile(guide, b, 0o644))
	code, _, errOut = runCLI("inspect", guide)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, guide)
}

// TestBenchFresh: `bench --fresh` measures each query's first run, once:
// as many searches as queries, the recall of the same answers as with a
// warm-up pass, and under a memory budget an on_disk index whose vector
// cache served nothing a query's own earlier run read (the repeats after
// a warm-up pass are served from it).
func TestBenchFresh(t *testing.T) {
	dir := t.TempDir()
	args := []string{"bench", onDiskFixture("clustered_l2", ".faiss"), "--queries", onDiskFixture("clustered_l2", ".queries.fvecs"),
		"--gt", onDiskFixture("clustered_l2", ".gt.ivecs"), "--k", "10", "--ef-search", "64", "--mode", "on_disk",
		"--compression", "8x", "--guide-dir", dir, "--memory-budget", "64000000", "--json"}
	bench := func(extra ...string) map[string]any {
		code, out, errOut := runCLI(append(args, extra...)...)
		require.Equal(t, 0, code, errOut)
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		return res
	}
	fresh := bench("--fresh")
	repeat := bench("--duration", "50ms")
	assert.EqualValues(t, 50, fresh["searches"], "one run of each of the 50 queries")
	assert.GreaterOrEqual(t, repeat["searches"], 50.0)
	assert.Equal(t, repeat["recall"], fresh["recall"])
	assert.Positive(t, fresh["rerank_reads_per_query"])
	assert.EqualValues(t, 100, repeat["rerank_cache_hits_per_query"], "every repeat's shortlist is cached")
	hits, _ := fresh["rerank_cache_hits_per_query"].(float64) // absent when 0
	assert.Less(t, hits, 100.0)
	code, _, errOut := runCLI(append(args, "--fresh", "--gt", filepath.Join(dir, "missing.ivecs"))...)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "missing.ivecs", "a bad ground truth fails before measuring")
}
