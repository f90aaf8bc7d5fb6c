package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// TestSearchS3CacheDir: search, bench and inspect of an s3:// object with
// --cache-dir print what they print for the local file, run after run; the
// second run answers from the cache directory (bench's storage_stats: no
// cold read, no GET beyond the open's).
func TestSearchS3CacheDir(t *testing.T) {
	bucket := s3test.Bucket(t)
	name := "hnsw_flat_large"
	local := filepath.Join(fixtures, name+".faiss")
	u := s3test.PutFile(t, bucket, name+".faiss", local)
	q := writeQueries(t, loadSearchFixture(t, name))
	dir := filepath.Join(t.TempDir(), "cache")
	args := []string{"--queries", q, "--k", "10"}
	code, want, errOut := runCLI(append([]string{"search", local}, args...)...)
	require.Equal(t, 0, code, errOut)
	for run := range 2 {
		code, got, errOut := runCLI(append([]string{"search", u, "--cache-dir", dir, "--cache-dir-bytes", "100000000"}, args...)...)
		require.Equal(t, 0, code, "run %d: %s", run, errOut)
		assert.Equal(t, want, got, "run %d", run)
	}
	_, err := os.Stat(filepath.Join(dir, diskcache.MarkerName))
	require.NoError(t, err)

	var res struct {
		StorageStats partial.Stats `json:"storage_stats"`
	}
	code, out, errOut := runCLI("bench", u, "--queries", q, "--k", "10", "--cache-dir", dir, "--cache-dir-bytes", "100000000", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.NotNil(t, res.StorageStats.Tiers, out)
	assert.Zero(t, res.StorageStats.Tiers.ColdReads, "every block from the cache directory")
	assert.Positive(t, res.StorageStats.Tiers.DiskHits)
	assert.Equal(t, int64(1), res.StorageStats.ReadCalls, "the open's GET only")
	assert.Equal(t, int64(100000000), res.StorageStats.Tiers.DiskBudgetBytes)

	code, wantInspect, errOut := runCLI("inspect", local, "--json")
	require.Equal(t, 0, code, errOut)
	code, got, errOut := runCLI("inspect", u, "--json", "--cache-dir", dir, "--cache-dir-bytes", "100000000")
	require.Equal(t, 0, code, errOut)
	got = strings.Replace(strings.ReplaceAll(got, u, local), `"backend": "s3"`, `"backend": "pread"`, 1)
	assert.Equal(t, wantInspect, got)

	// A negative budget is a usage error, before anything is read.
	for _, cmd := range [][]string{
		append([]string{"search", u, "--cache-dir", dir, "--cache-dir-bytes", "-1"}, args...),
		{"inspect", u, "--cache-dir", dir, "--cache-dir-bytes", "-1"},
	} {
		code, _, errOut = runCLI(cmd...)
		assert.Equal(t, 2, code, "%v: %s", cmd, errOut)
		assert.Contains(t, errOut, "disk cache budget -1 is negative", cmd)
	}
}

// TestServeCacheDirConfig: cache_dir and cache_dir_bytes are config keys
// (flags --cache-dir, --cache-dir-bytes); a negative budget is refused at
// start.
func TestServeCacheDirConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"listen":"127.0.0.1:1","cache_dir":"`+t.TempDir()+`","cache_dir_bytes":-5}`), 0o644))
	code, _, errOut := runCLI("serve", "--config", p)
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "disk cache budget -5 is negative")
	code, _, errOut = runCLI("serve", "--config", p, "--cache-dir-bytes", "-7")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "disk cache budget -7 is negative", "the flag over the file")
}
