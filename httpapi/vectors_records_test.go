package httpapi

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSeparateVectorsCorruptREST: a vectors_path .fvecs file whose records
// disagree (record 5 says d=31, the last d=33, the file 2000 × 132 bytes
// as the graph wants), or whose last record is cut short, is a 422 naming
// the file as the client gave it and the record, in mode full and on the
// memory_efficient backends, and the index is not served.
func TestSeparateVectorsCorruptREST(t *testing.T) {
	src := filepath.Join("..", "testdata", "faiss115")
	root := t.TempDir()
	graph, err := os.ReadFile(filepath.Join(src, "hnsw_flat_l2_skip_storage.faiss"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "g.faiss"), graph, 0o644))
	good, err := os.ReadFile(filepath.Join(src, "hnsw_flat_l2_skip_storage.fvecs"))
	require.NoError(t, err)
	require.Len(t, good, 2000*132)
	attack := bytes.Clone(good)
	binary.LittleEndian.PutUint32(attack[5*132:], 31)
	binary.LittleEndian.PutUint32(attack[1999*132:], 33)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "v"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "v", "attack.fvecs"), attack, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "v", "cut.fvecs"), good[:len(good)-5], 0o644))
	_, ts := newTestServer(t, Config{DataRoots: []string{root}, GuideDir: t.TempDir()})

	for _, c := range []struct{ file, msg string }{
		{"v/attack.fvecs", "v/attack.fvecs: record 5 says d=31, the first says d=32"},
		{"v/cut.fvecs", "v/cut.fvecs: record 1999 is cut short: 127 of its 132 bytes (truncated?)"},
	} {
		for _, mode := range []string{`"mode":"full"`, `"mode":"memory_efficient","backend":"pread"`, `"mode":"memory_efficient","backend":"mmap"`} {
			r := call(t, ts, "PUT", "/indexes/s", `{"path":"g.faiss","vectors_path":"`+c.file+`",`+mode+`}`)
			require.Equal(t, 422, r.Status, "%s %s: %s", c.file, mode, r.Raw)
			assert.Equal(t, "bad_index_file", r.Body["error"].(map[string]any)["type"], r.Raw)
			assert.Contains(t, r.Raw, c.msg, "%s %s", c.file, mode)
			assert.NotContains(t, r.Raw, root, "%s %s: the server's path", c.file, mode)
			assert.Equal(t, 404, call(t, ts, "POST", "/indexes/s/_search", `{"vector":[`+zeros(32)+`],"k":1}`).Status)
		}
	}
}

func zeros(n int) string {
	var b bytes.Buffer
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('0')
	}
	return b.String()
}
