package httpapi

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
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

// TestJSONKeysExact: every JSON body takes its keys in their exact case
// and once: a key in another case is an unknown field, a key given twice
// a 400 duplicate_field naming it, at any depth, in every endpoint with a
// body (encoding/json took "K" for k and the last of two).
func TestJSONKeysExact(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/i", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	q := vectorJSON(make([]float64, 32))
	for _, c := range []struct {
		method, path, body string
		typ, reason        string
	}{
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":2,"K":4}`, "bad_request", `unknown field "K"`},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":2,"k":4}`, "duplicate_field", `duplicate field "k"`},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":2,"\u006b":4}`, "duplicate_field", `duplicate field "k"`},
		{"POST", "/indexes/i/_search", `{"Vector":` + q + `}`, "bad_request", `unknown field "Vector"`},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"method_parameters":{"ef_search":8,"ef_search":9}}`, "duplicate_field", `duplicate field "ef_search" in method_parameters`},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"filter":{"IDS":[1]}}`, "bad_request", `unknown field "IDS" in filter`},
		{"POST", "/indexes/i/_msearch", `{"vectors":[` + q + `],"K":4}`, "bad_request", `unknown field "K"`},
		{"POST", "/indexes/i/_msearch", `{"vectors":[` + q + `],"vectors":[` + q + `]}`, "duplicate_field", `duplicate field "vectors"`},
		{"PUT", "/indexes/j", `{"PATH":"hnsw_flat_l2.faiss","MODE":"full"}`, "bad_request", `unknown field "PATH"`},
		{"PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss","path":"hnsw_flat_ip.faiss"}`, "duplicate_field", `duplicate field "path"`},
		{"PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss","rerank":{"vectors_path":"a","Strategy":"direct"}}`, "bad_request", `unknown field "Strategy" in rerank`},
		{"PUT", "/indexes/i/_mode", `{"Mode":"full"}`, "bad_request", `unknown field "Mode"`},
		{"PUT", "/indexes/i/_mode", `{"mode":"full","mode":"on_disk"}`, "duplicate_field", `duplicate field "mode"`},
	} {
		r := call(t, ts, c.method, c.path, c.body)
		assert.Equal(t, 400, r.Status, "%s %s %s: %s", c.method, c.path, c.body, r.Raw)
		e, _ := r.Body["error"].(map[string]any)
		require.NotNil(t, e, r.Raw)
		assert.Equal(t, c.typ, e["type"], r.Raw)
		assert.Equal(t, c.reason, e["reason"], r.Raw)
	}
	// Nothing of those took effect.
	r := call(t, ts, "GET", "/indexes/i", "")
	assert.Equal(t, "memory_efficient", r.Body["mode"])
	assert.Equal(t, 404, call(t, ts, "GET", "/indexes/j", "").Status)
	// Exact keys still work, on the fast path and the slow one.
	r = call(t, ts, "POST", "/indexes/i/_search", `{"vector":`+q+`,"k":2}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Len(t, r.Body["hits"], 2)
	r = call(t, ts, "POST", "/indexes/i/_search", `{"vect\u006fr":`+q+`,"k":3}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Len(t, r.Body["hits"], 3)
}

// TestSwitchRefusedIsNotFailed: a switch refused before it starts (a bad
// mode, one that cannot fit the budget) counts as outcome="refused" and is
// logged at info, not as a failed switch; a switch of a name not served
// makes no series; an ok switch still counts ok.
func TestSwitchRefusedIsNotFailed(t *testing.T) {
	var logs syncBuffer
	_, ts := newTestServer(t, Config{MemoryBudget: 100_000, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/i", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	r := call(t, ts, "PUT", "/indexes/i/_mode", `{"mode":"turbo"}`)
	require.Equal(t, 400, r.Status, r.Raw)
	r = call(t, ts, "PUT", "/indexes/i/_mode", `{"mode":"full"}`) // 137 kB: more than the node has
	require.Equal(t, 400, r.Status, r.Raw)
	require.Equal(t, "memory_budget_exceeded", r.Body["error"].(map[string]any)["type"], r.Raw)
	require.Equal(t, 404, call(t, ts, "PUT", "/indexes/nobody/_mode", `{"mode":"full"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/i/_mode", `{"kernel":"exact"}`).Status)
	m := call(t, ts, "GET", "/metrics", "").Raw
	assert.Contains(t, m, `faiss_sidecar_mode_switches_total{index="i",outcome="refused"} 2`)
	assert.Contains(t, m, `faiss_sidecar_mode_switches_total{index="i",outcome="ok"} 1`)
	assert.NotContains(t, m, `outcome="failed"`)
	assert.NotContains(t, m, `index="nobody"`)
	out := logs.String()
	assert.NotContains(t, out, "mode switch failed")
	assert.Contains(t, out, `"level":"INFO","msg":"mode switch refused","index":"i"`)
}

// syncBuffer is a bytes.Buffer a logger and a test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// packagePrefixes are what a user-facing message must not start a clause
// with: the Go package that wrote it says nothing to a REST client.
var packagePrefixes = []string{"faissfmt:", "partial:", "vecio:", "engine:", "hnswsearch:", "quant:", "rerank:", "s3:"}

// TestErrorBodiesForUsers: the errors a REST client meets with ordinary
// mistakes (a text file, a binary junk file or a directory as path, a
// missing file, bad mode, backend, compression or space_type, a file
// changed under a served index) never echo bytes of a file, never name
// the server's spelling of a path (only the path as sent), and carry no
// Go package prefix.
func TestErrorBodiesForUsers(t *testing.T) {
	root := t.TempDir()
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"idx.faiss":     src,
		"served.faiss":  src,
		"text.faiss":    []byte("JUNKMARK: a text file, not an index\nJUNKMARK secret=hunter2\n"),
		"binary.faiss":  append([]byte("\x01JUNKMARK\xff"), bytes.Repeat([]byte("JUNKMARK"), 100)...),
		"fourcc.faiss":  append([]byte("IwJU"), src[4:]...),
		"vectors.fvecs": bytes.Repeat([]byte("JUNKMARK"), 50),
	} {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), b, 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(root, "dir"), 0o755))
	flat, err := os.ReadFile(filepath.Join(fixtures, "flat_l2.faiss"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "flat.faiss"), flat, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "corr.faiss"), corruptLevel0(t, src), 0o644))
	_, ts := newTestServer(t, Config{DataRoots: []string{root}})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/i", `{"path":"idx.faiss"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/c", `{"path":"corr.faiss","mode":"memory_efficient"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/s", `{"path":"served.faiss","mode":"memory_efficient","backend":"pread"}`).Status)
	check := func(r resp, status int, want string) {
		t.Helper()
		assert.Equal(t, status, r.Status, r.Raw)
		e, _ := r.Body["error"].(map[string]any)
		require.NotNil(t, e, r.Raw)
		reason, _ := e["reason"].(string)
		assert.Contains(t, reason, want)
		assert.NotContains(t, r.Raw, "JUNK", "bytes of the file")
		assert.NotContains(t, r.Raw, "hunter2", "bytes of the file")
		assert.NotContains(t, reason, "0x", "bytes of the file in hex")
		for _, p := range packagePrefixes {
			assert.NotContains(t, reason, p)
		}
	}
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/indexes/j", `{"path":"text.faiss"}`, 422, "text.faiss: not a FAISS index file"},
		{"PUT", "/indexes/j", `{"path":"binary.faiss"}`, 422, "binary.faiss: not a FAISS index file"},
		{"PUT", "/indexes/j", `{"path":"fourcc.faiss","mode":"full"}`, 422, "not a FAISS index file"},
		{"PUT", "/indexes/j", `{"path":"dir"}`, 400, "dir is a directory, not a regular file"},
		{"PUT", "/indexes/j", `{"path":"missing.faiss"}`, 404, "no file at missing.faiss"},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","mode":"turbo"}`, 400, `unknown mode "turbo" (known: full, memory_efficient, on_disk)`},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","backend":"tape"}`, 400, `unknown backend "tape" (known: `},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","mode":"full","backend":"mmap"}`, 400, `mode full reads the whole file into memory`},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","mode":"on_disk","compression":"3x"}`, 400, `unknown compression "3x" (known: `},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","space_type":"cosine"}`, 400, `unknown space_type "cosine" (known: `},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","mode":"full","rerank":{"vectors_path":"text.faiss"}}`, 422, "text.faiss"},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","mode":"full","rerank":{"vectors_path":"vectors.fvecs"}}`, 422, "vectors.fvecs"},
		{"PUT", "/indexes/i/_mode", `{"mode":"turbo"}`, 400, `unknown mode "turbo" (known: full, memory_efficient, on_disk)`},
		{"PUT", "/indexes/i/_mode", `{"backend":"tape"}`, 400, `unknown backend "tape"`},
		{"PUT", "/indexes/i/_mode", `{"mode":"full","backend":"pread"}`, 400, `mode full reads the whole file into memory`},
		{"PUT", "/indexes/j", `{"path":"flat.faiss"}`, 422, "flat.faiss: IxF2 index has no HNSW graph; searchable are"},
		{"POST", "/indexes/c/_search", `{"vector":` + vectorJSON(make([]float64, 32)) + `}`, 422, "index file corr.faiss is corrupt: corrupt index: neighbor id 500 "},
		{"PUT", "/indexes/j", `{"path":"corr.faiss","mode":"full"}`, 422, "corr.faiss: neighbor id 500 at node "},
		{"POST", "/indexes/c/_search", `{"vector":[1,2]}`, 400, "vector has 2 values, index corr.faiss expects 32"},
		{"POST", "/indexes/c/_search", `{"vector":` + vectorJSON(make([]float64, 32)) + `,"rescore":{"oversample_factor":2}}`, 400, "rescore needs an index loaded with rerank.vectors_path"},
	} {
		r := call(t, ts, c.method, c.path, c.body)
		check(r, c.status, c.want)
		assert.NotContains(t, r.Raw, root, "%s %s: the server's path of a file sent relative", c.method, c.body)
	}
	// A file changed under a served index: its searches, GET and a switch
	// name the file as it was sent, with no package prefix.
	require.NoError(t, os.WriteFile(filepath.Join(root, "served.faiss"), src[:len(src)/2], 0o644))
	q := `{"vector":` + vectorJSON(make([]float64, 32)) + `}`
	r := call(t, ts, "POST", "/indexes/s/_search", q)
	check(r, 503, "a file this index serves (served.faiss) changed after it was loaded: file changed: served.faiss: truncated from ")
	assert.NotContains(t, r.Raw, root)
	r = call(t, ts, "GET", "/indexes/s", "")
	assert.Equal(t, "failed", r.Body["state"], r.Raw)
	assert.NotContains(t, r.Raw, root)
	r = call(t, ts, "PUT", "/indexes/s/_mode", `{"mode":"full"}`)
	assert.GreaterOrEqual(t, r.Status, 400, r.Raw)
	assert.NotContains(t, r.Raw, root)
	assert.NotContains(t, call(t, ts, "GET", "/indexes/s", "").Raw, root, "last_switch_error")
}

// corruptLevel0 returns a copy of an HNSW file whose level-0 neighbor
// lists, all but the entry point's, hold the out-of-range id ntotal: it
// loads where lists are not checked at load, and a search meets it.
func corruptLevel0(t *testing.T, src []byte) []byte {
	t.Helper()
	b := bytes.Clone(src)
	f, err := faissfmt.Open(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	h, n := f.Graph.HNSW, f.Graph.NTotal
	for v := range int32(n) {
		if v == h.EntryPoint {
			continue
		}
		lo, hi := h.NeighborSlots(v, 0)
		for s := lo; s < hi; s++ {
			binary.LittleEndian.PutUint32(b[h.Neighbors.Offset+4*s:], uint32(n))
		}
	}
	return b
}

// TestDamagedGuideNamedAsSent: the layers below the server name a file as
// the client sent it, or by the setting that holds it, since they are
// given that name when they open it: a damaged guide, beside the index or
// in the guide directory, is reported rebuilt under that name, never the
// server's path.
func TestDamagedGuideNamedAsSent(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "testdata", "ondisk", "clustered_l2.faiss"))
	require.NoError(t, err)
	root, guides := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "c.faiss"), src, 0o644))
	junk := []byte("not a guide, and long enough to hold a header's worth of bytes: " + strings.Repeat("x", 256))
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "c.faiss.4x.guide"), junk, 0o644))
	rebuilt := func(r resp) string {
		t.Helper()
		require.Equal(t, 200, r.Status, r.Raw)
		g, _ := r.Body["guide"].(map[string]any)
		require.NotNil(t, g, r.Raw)
		assert.Equal(t, false, g["loaded"], r.Raw)
		reason, _ := g["rebuilt"].(string)
		return reason
	}
	_, ts := newTestServer(t, Config{DataRoots: []string{root}})
	r := call(t, ts, "PUT", "/indexes/c", `{"path":"sub/c.faiss","mode":"on_disk","compression":"4x"}`)
	assert.True(t, strings.HasPrefix(rebuilt(r), "sub/c.faiss.4x.guide: "), r.Raw)
	assert.NotContains(t, r.Raw, root)

	_, ts = newTestServer(t, Config{DataRoots: []string{root}, GuideDir: guides})
	r = call(t, ts, "PUT", "/indexes/c", `{"path":"sub/c.faiss","mode":"on_disk","compression":"8x"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/c", "").Status)
	built, err := filepath.Glob(filepath.Join(guides, "*.8x.guide"))
	require.NoError(t, err)
	require.Len(t, built, 1)
	require.NoError(t, os.WriteFile(built[0], junk, 0o644))
	r = call(t, ts, "PUT", "/indexes/c", `{"path":"sub/c.faiss","mode":"on_disk","compression":"8x"}`)
	assert.True(t, strings.HasPrefix(rebuilt(r), "guide_dir/"+filepath.Base(built[0])+": "), r.Raw)
	assert.NotContains(t, r.Raw, guides)
	assert.NotContains(t, r.Raw, root)
}
