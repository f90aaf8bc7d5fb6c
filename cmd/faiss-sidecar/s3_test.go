package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// TestInspectS3: inspect of s3://BUCKET/KEY prints what inspect prints for
// the same file on local disk (human, --json, --verify), but for the path
// and, in JSON, the backend.
func TestInspectS3(t *testing.T) {
	bucket := s3test.Bucket(t)
	for _, name := range []string{"hnsw_flat_large.faiss", "opensearch_0_165_vec.faiss", "bin_idmap_hnsw.faiss"} {
		local := filepath.Join(fixtures, name)
		u := s3test.PutFile(t, bucket, "dir/"+name, local)
		for _, flags := range [][]string{nil, {"--json"}, {"--verify"}} {
			code, want, errOut := runCLI(append([]string{"inspect", local}, flags...)...)
			require.Equal(t, 0, code, errOut)
			code, got, errOut := runCLI(append([]string{"inspect", u}, flags...)...)
			require.Equal(t, 0, code, "%s %v: %s", name, flags, errOut)
			require.Empty(t, errOut)
			got = strings.ReplaceAll(got, u, local)
			if len(flags) > 0 && flags[0] == "--json" {
				require.Contains(t, got, `"backend": "s3"`)
				got = strings.Replace(got, `"backend": "s3"`, `"backend": "pread"`, 1)
			}
			assert.Equal(t, want, got, "%s %v", name, flags)
		}
	}
	code, out, errOut := runCLI("inspect", "s3://"+bucket+"/missing.faiss")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "s3://"+bucket+"/missing.faiss")
	assert.Contains(t, errOut, "no such object")
}

// TestSearchS3: search of s3://BUCKET/KEY prints byte for byte what search
// prints for the same file on local disk, in modes memory_efficient and
// full.
func TestSearchS3(t *testing.T) {
	bucket := s3test.Bucket(t)
	for _, name := range []string{"hnsw_flat_large", "bin_idmap_hnsw"} {
		local := filepath.Join(fixtures, name+".faiss")
		u := s3test.PutFile(t, bucket, name+".faiss", local)
		q := writeQueries(t, loadSearchFixture(t, name))
		for _, mode := range []string{"memory_efficient", "full"} {
			args := []string{"--queries", q, "--k", "10", "--mode", mode}
			code, want, errOut := runCLI(append([]string{"search", local}, args...)...)
			require.Equal(t, 0, code, errOut)
			require.NotEmpty(t, want)
			code, got, errOut := runCLI(append([]string{"search", u}, args...)...)
			require.Equal(t, 0, code, "%s %s: %s", name, mode, errOut)
			assert.Equal(t, want, got, "%s %s", name, mode)
		}
	}
}
