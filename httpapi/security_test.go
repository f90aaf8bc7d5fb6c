package httpapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadDataRoots: the library refuses what cannot be a data root, so no
// caller can serve the working directory through an empty one.
func TestBadDataRoots(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	for root, want := range map[string]string{
		"":                           `data root "" is empty`,
		" ":                          `data root " " is empty`,
		file:                         `is a regular file: name a directory`,
		filepath.Join(dir, "absent"): `does not exist`,
	} {
		_, err := New(Config{DataRoots: []string{dir, root}})
		require.Error(t, err, "%q", root)
		assert.Contains(t, err.Error(), want)
		_, err = NewRegistry([]string{root}, 0)
		require.Error(t, err, "%q", root)
		assert.Contains(t, err.Error(), want)
	}
	_, err := New(Config{DataRoots: []string{dir}})
	require.NoError(t, err)
}

// TestOutsideRootsTellsNothing: a path outside the data roots gets the
// same answer whether or not the file exists, whatever its spelling
// (absolute, relative with .., a symlink inside pointing out, to a target
// that exists or not), and the answer names the path as sent.
func TestOutsideRootsTellsNothing(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "out")
	require.NoError(t, os.Mkdir(root, 0o755))
	require.NoError(t, os.Mkdir(outside, 0o755))
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(outside, "there.faiss"), src, 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "there.faiss"), filepath.Join(root, "l-there.faiss")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "absent.faiss"), filepath.Join(root, "l-absent.faiss")))
	_, ts := newTestServer(t, Config{DataRoots: []string{root}})
	answer := func(path string) string {
		r := call(t, ts, "PUT", "/indexes/x", `{"path":"`+path+`"}`)
		require.Equal(t, 403, r.Status, r.Raw)
		return strings.ReplaceAll(r.Raw, path, "PATH")
	}
	for _, pair := range [][2]string{
		{filepath.Join(outside, "there.faiss"), filepath.Join(outside, "absent.faiss")},
		{"../out/there.faiss", "../out/absent.faiss"},
		{"l-there.faiss", "l-absent.faiss"},
		{"/etc/passwd", "/etc/no-such-file"},
	} {
		assert.Equal(t, answer(pair[0]), answer(pair[1]), "%q and %q", pair[0], pair[1])
	}
	r := call(t, ts, "PUT", "/indexes/x", `{"path":"../out/there.faiss"}`)
	assert.Contains(t, r.Raw, `"../out/there.faiss is outside the data roots"`)
	assert.NotContains(t, r.Raw, base, "the server's own spelling of the path")
	r = call(t, ts, "PUT", "/indexes/x", `{"path":"absent.faiss"}`)
	assert.Equal(t, 404, r.Status, r.Raw)
	assert.Contains(t, r.Raw, `no file at absent.faiss`)
	assert.NotContains(t, r.Raw, base)
}
