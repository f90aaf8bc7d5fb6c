package httpapi

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// procFiles is the process's open descriptors.
func procFiles(t *testing.T) int {
	d, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(d)
}

// TestOpenFilesCounted: what the registry counts for a served index
// (handleFiles) is what it holds open, in every mode and backend, with a
// separate vector file and with rerank vectors, and all of it is given
// back when the index is deleted.
func TestOpenFilesCounted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts /proc/self/fd")
	}
	f115, err := filepath.Abs("../testdata/faiss115")
	require.NoError(t, err)
	od, err := filepath.Abs("../testdata/ondisk")
	require.NoError(t, err)
	s, err := New(Config{DataRoots: []string{od, f115}, GuideDir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()
	idx := `"path":"` + filepath.Join(od, "clustered_l2.faiss") + `"`
	sep := `"path":"` + filepath.Join(f115, "hnsw_flat_l2_skip_storage.faiss") + `","vectors_path":"` + filepath.Join(f115, "hnsw_flat_l2_skip_storage.fvecs") + `"`
	for i, body := range []string{
		idx + `,"mode":"full"`, idx + `,"backend":"mmap"`, idx + `,"backend":"pread"`, idx + `,"backend":"direct"`,
		idx + `,"memory_budget":50000000`,
		idx + `,"mode":"on_disk","compression":"32x"`, idx + `,"mode":"on_disk","compression":"32x","backend":"direct"`,
		idx + `,"mode":"on_disk","compression":"32x","rerank":{"strategy":"pread"}`,
		idx + `,"mode":"on_disk","compression":"32x","rerank":{"strategy":"direct"}`,
		idx + `,"rerank":{"vectors_path":"` + filepath.Join(od, "clustered_l2.faiss") + `"}`,
		idx + `,"mode":"full","rerank":{"vectors_path":"` + filepath.Join(od, "clustered_l2.faiss") + `","strategy":"mmap"}`,
		sep + `,"mode":"full"`, sep + `,"backend":"mmap"`, sep + `,"backend":"direct"`, sep + `,"mode":"on_disk","compression":"4x"`,
	} {
		var spec LoadSpec
		require.NoError(t, decodeJSON([]byte("{"+body+"}"), &spec))
		name := fmt.Sprint("x", i)
		before := procFiles(t)
		require.NoError(t, s.Reg.Load(name, spec), body)
		h := s.Reg.get(name).cur.Load()
		assert.EqualValues(t, procFiles(t)-before, h.files, "%s (served as backend %s, rerank %+v)", body, h.spec.Backend, h.spec.Rerank)
		assert.Equal(t, h.files, s.Reg.files.Load())
		require.NoError(t, s.Reg.Delete(name, 0))
		assert.Equal(t, before, procFiles(t), body)
		assert.Zero(t, s.Reg.files.Load())
	}
	// A load that fails gives back the file its plan held: in Prepare (not
	// a FAISS file), or in Open (a space type of another metric, rerank
	// vectors that are not the index's).
	for _, body := range []string{
		`"path":"` + filepath.Join(f115, "hnsw_flat_l2_skip_storage.fvecs") + `"`,
		idx + `,"space_type":"innerproduct"`, idx + `,"mode":"full","space_type":"innerproduct"`,
		idx + `,"rerank":{"vectors_path":"` + filepath.Join(f115, "queries.fvecs") + `"}`,
	} {
		var spec LoadSpec
		require.NoError(t, decodeJSON([]byte("{"+body+"}"), &spec))
		before := procFiles(t)
		require.Error(t, s.Reg.Load("bad", spec), body)
		assert.Equal(t, before, procFiles(t), body)
		assert.Zero(t, s.Reg.files.Load(), body)
	}
}

// TestMaxOpenFiles: past max_open_files a load is refused with an error
// naming the limit (429, or 400 when the index alone needs more), served
// indexes go on answering, a delete makes room again, a load in mode full
// counts its file while it reads it, and a switch may pass the limit by
// what the handle it replaces holds, no more.
func TestMaxOpenFiles(t *testing.T) {
	s, ts := newTestServer(t, Config{Limits: Limits{MaxOpenFiles: 4}})
	for _, n := range []string{"a", "b", "c", "d"} {
		r := call(t, ts, "PUT", "/indexes/"+n, `{"path":"hnsw_flat_l2.faiss","backend":"mmap"}`)
		require.Equal(t, 200, r.Status, r.Raw)
	}
	r := call(t, ts, "PUT", "/indexes/e", `{"path":"hnsw_flat_l2.faiss","backend":"mmap"}`)
	require.Equal(t, 429, r.Status, r.Raw)
	assert.Equal(t, "max_open_files_exceeded", r.Body["error"].(map[string]any)["type"])
	assert.Contains(t, r.Raw, "the loaded indexes hold 4 of the 4 the server allows (max_open_files)")
	assert.Equal(t, 404, call(t, ts, "GET", "/indexes/e", ``).Status, "nothing left behind")
	q := vectorJSON(loadRuns(t, "hnsw_flat_l2").Queries[0])
	for _, n := range []string{"a", "b", "c", "d"} {
		assert.Equal(t, 200, call(t, ts, "POST", "/indexes/"+n+"/_search", `{"vector":`+q+`}`).Status)
	}
	// Mode full holds its file open while it reads it, and none after.
	r = call(t, ts, "PUT", "/indexes/full", `{"path":"hnsw_flat_l2.faiss","mode":"full"}`)
	require.Equal(t, 429, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "the index needs 1, and the loaded indexes hold 4 of the 4")
	assert.EqualValues(t, 4, s.Reg.files.Load())
	// A switch to pread holds the new file beside the old for a moment.
	r = call(t, ts, "PUT", "/indexes/a/_mode", `{"backend":"pread"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	// One to direct I/O needs four, three more than the handle it replaces.
	r = call(t, ts, "PUT", "/indexes/a/_mode", `{"backend":"direct"}`)
	require.Equal(t, 429, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "max_open_files")
	assert.Equal(t, 200, call(t, ts, "POST", "/indexes/a/_search", `{"vector":`+q+`}`).Status)
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/b", ``).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/full", `{"path":"hnsw_flat_l2.faiss","mode":"full"}`).Status)
	assert.EqualValues(t, 3, s.Reg.files.Load())
	r = call(t, ts, "PUT", "/indexes/e", `{"path":"hnsw_flat_l2.faiss","backend":"mmap"}`)
	require.Equal(t, 200, r.Status, r.Raw)

	// Alone, a direct index needs more than a limit of 2: it never fits.
	_, ts = newTestServer(t, Config{Limits: Limits{MaxOpenFiles: 2}})
	r = call(t, ts, "PUT", "/indexes/x", `{"path":"hnsw_flat_l2.faiss","backend":"direct"}`)
	require.Equal(t, 400, r.Status, r.Raw)
	assert.Equal(t, "max_open_files_exceeded", r.Body["error"].(map[string]any)["type"])
	assert.Contains(t, r.Raw, "(max_open_files 2)")
}

// TestDefaultOpenFiles: the default leaves the connections, the server's
// own and the disk cache their descriptors, and the indexes at least a
// quarter of the limit.
func TestDefaultOpenFiles(t *testing.T) {
	assert.EqualValues(t, 20000-2048-ownFiles, defaultOpenFiles(20000, 2048, 0))
	assert.EqualValues(t, 1048576-2048-ownFiles-16384, defaultOpenFiles(1048576, 2048, 16384))
	assert.EqualValues(t, 256, defaultOpenFiles(1024, 2048, 256))
	assert.Greater(t, defaultOpenFiles(0, 2048, 0), int64(1<<30), "unknown: no bound")
	l := Limits{}.withDefaults(0)
	assert.Positive(t, l.MaxOpenFiles)
	assert.Error(t, Limits{MaxOpenFiles: -1}.Check())
}
