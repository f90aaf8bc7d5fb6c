package httpapi

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
