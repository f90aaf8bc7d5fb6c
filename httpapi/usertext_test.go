package httpapi

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodeErrorsForUsers: a body of the wrong JSON type, a field of the
// wrong type and text that is not JSON are answered in the client's
// terms (the field, the JSON type wanted and given, the byte), never with
// encoding/json's Go types, on every endpoint that reads a body.
func TestDecodeErrorsForUsers(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	vec := vectorJSON(make([]float64, 32))
	for _, c := range []struct {
		method, path, body, reason string
	}{
		{"POST", "/indexes/j/_search", `[]`, "the body must be a JSON object, got an array"},
		{"POST", "/indexes/j/_search", `"x"`, "the body must be a JSON object, got a string"},
		{"POST", "/indexes/j/_search", `{"vector":` + vec + `,"k":2.5}`, "k must be an integer, got a number 2.5"},
		{"POST", "/indexes/j/_search", `{"vector":` + vec + `,"k":"2"}`, "k must be an integer, got a string"},
		{"POST", "/indexes/j/_search", `{"vector":` + vec + `,"method_parameters":{"ef_search":true}}`, "method_parameters.ef_search must be an integer, got a boolean"},
		{"POST", "/indexes/j/_search", `{"vector":` + vec + `,"k":2,}`, "invalid JSON at byte "},
		{"POST", "/indexes/j/_search", `{garbage`, "invalid JSON at byte 2: "},
		{"POST", "/indexes/j/_msearch", `[1]`, "the body must be a JSON object, got an array"},
		{"POST", "/indexes/j/_msearch", `{"vectors":[` + vec + `],"k":"3"}`, "k must be an integer, got a string"},
		{"PUT", "/indexes/p", `[]`, "the body must be a JSON object, got an array"},
		{"PUT", "/indexes/p", `{"path":5}`, "path must be a string, got a number"},
		{"PUT", "/indexes/p", `{"path":"hnsw_flat_l2.faiss","rerank":[]}`, "rerank must be an object, got an array"},
		{"PUT", "/indexes/p", `{"path":`, "invalid JSON"},
		{"PUT", "/indexes/j/_mode", `[]`, "the body must be a JSON object, got an array"},
		{"PUT", "/indexes/j/_mode", `{"mode":{}}`, "mode must be a string, got an object"},
		{"PUT", "/indexes/j/_mode", `{"mode":"full" "x"}`, "invalid JSON at byte "},
	} {
		r := call(t, ts, c.method, c.path, c.body)
		assert.Equal(t, 400, r.Status, "%s %s: %s", c.path, c.body, r.Raw)
		e, _ := r.Body["error"].(map[string]any)
		require.NotNil(t, e, r.Raw)
		reason, _ := e["reason"].(string)
		assert.Contains(t, reason, c.reason, "%s %s", c.path, c.body)
		for _, no := range []string{"Go value", "Go struct", "httpapi.", "json:", "unmarshal"} {
			assert.NotContains(t, reason, no, "%s %s", c.path, c.body)
		}
	}
}

// TestWarmupBody: _warmup takes an empty body or {}; text that is not
// JSON, a field, a key given twice or binary bytes are a 400 as on every
// other endpoint, and nothing is warmed.
func TestWarmupBody(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	for _, body := range []string{"", " \n", "{}", " { } "} {
		r := call(t, ts, "POST", "/indexes/j/_warmup", body)
		assert.Equal(t, 200, r.Status, "%q: %s", body, r.Raw)
	}
	for body, reason := range map[string]string{
		`{garbage`:         "invalid JSON at byte 2",
		"\x00\x01\xff\xfe": "invalid JSON at byte 1",
		`{"a":1,"a":1}`:    `unknown field "a"`,
		`{"timeout":"1s"}`: `unknown field "timeout"`,
		`[]`:               "the body must be a JSON object, got an array",
		`{}{}`:             "data after the object",
		`null`:             "the body must be a JSON object, not null",
	} {
		r := call(t, ts, "POST", "/indexes/j/_warmup", body)
		assert.Equal(t, 400, r.Status, "%q: %s", body, r.Raw)
		e, _ := r.Body["error"].(map[string]any)
		require.NotNil(t, e, r.Raw)
		assert.Contains(t, e["reason"], reason, "%q", body)
	}
	assert.Equal(t, 404, call(t, ts, "POST", "/indexes/none/_warmup", "{}").Status)
}

// TestNullWhereValueRequired: a null where an object or a list is
// required is a 400 naming the field, as OpenSearch answers, on _search,
// _msearch and PUT; k's own null rule stays.
func TestNullWhereValueRequired(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	vec := vectorJSON(make([]float64, 32))
	for _, c := range []struct {
		path, body, reason string
	}{
		{"/indexes/j/_search", `{"vector":` + vec + `,"filter":{"ids":null}}`, "filter.ids must be a list of integers, not null"},
		{"/indexes/j/_search", `{"vector":` + vec + `,"filter":null}`, "filter must be an object, not null"},
		{"/indexes/j/_search", `{"vector":null}`, "vector must be a list of numbers, not null"},
		{"/indexes/j/_search", `{"vector":` + vec + `,"method_parameters":null}`, "method_parameters must be an object, not null"},
		{"/indexes/j/_search", `{"vector":` + vec + `,"rescore":null}`, "rescore must be an object, not null"},
		{"/indexes/j/_search", `null`, "the body must be a JSON object, not null"},
		{"/indexes/j/_search", `{"vector":` + vec + `,"k":null}`, "k is null; give a number in [1, 10000] or leave k out (default 10)"},
		{"/indexes/j/_msearch", `{"vectors":null}`, "vectors must be a list of lists, not null"},
		{"/indexes/j/_msearch", `{"vectors":[` + vec + `,null]}`, "vectors[1] must be a list of numbers, not null"},
		{"/indexes/j/_msearch", `{"vectors":[` + vec + `],"filter":{"ids":null}}`, "filter.ids must be a list of integers, not null"},
		{"/indexes/j/_msearch", `{"vectors":[` + vec + `],"rescore":null}`, "rescore must be an object, not null"},
	} {
		r := call(t, ts, "POST", c.path, c.body)
		assert.Equal(t, 400, r.Status, "%s: %s", c.body, r.Raw)
		e, _ := r.Body["error"].(map[string]any)
		require.NotNil(t, e, r.Raw)
		assert.Equal(t, c.reason, e["reason"], "%s", c.body)
	}
	r := call(t, ts, "PUT", "/indexes/p", `{"path":"hnsw_flat_l2.faiss","rerank":null}`)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "rerank must be an object, not null")
	// An empty list is a list: a filter of no ids allows nothing.
	r = call(t, ts, "POST", "/indexes/j/_search", `{"vector":`+vec+`,"filter":{"ids":[]}}`)
	assert.Equal(t, 200, r.Status, r.Raw)
	assert.Contains(t, r.Body, "hits", r.Raw)
	assert.Empty(t, r.Body["hits"], r.Raw)
}

// TestFileChangedInWords: a served file replaced at its path answers 503
// saying so in words and naming the file as sent; the device:inode
// numbers and times go to the server's log only.
func TestFileChangedInWords(t *testing.T) {
	root := t.TempDir()
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	path := filepath.Join(root, "sub", "r.faiss")
	require.NoError(t, os.WriteFile(path, src, 0o644))
	var logs syncBuffer
	s, ts := newTestServer(t, Config{DataRoots: []string{root}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/r", `{"path":"sub/r.faiss","mode":"memory_efficient","backend":"pread"}`).Status)
	require.NoError(t, os.WriteFile(path+".new", src, 0o644))
	require.NoError(t, os.Rename(path+".new", path))
	s.checkFile(context.Background(), "r", s.Reg.get("r"))
	r := call(t, ts, "POST", "/indexes/r/_search", `{"vector":`+vectorJSON(make([]float64, 32))+`}`)
	require.Equal(t, 503, r.Status, r.Raw)
	reason := r.Body["error"].(map[string]any)["reason"].(string)
	assert.Contains(t, reason, "a file this index serves (sub/r.faiss) changed after it was loaded: file changed: sub/r.faiss: replaced: the path names another file now")
	for _, no := range []string{"inode", "mtime", "ctime", root} {
		assert.NotContains(t, reason, no)
	}
	assert.NotContains(t, call(t, ts, "GET", "/indexes/r", "").Raw, "inode")
	assert.Contains(t, logs.String(), `"detail":"inode `, "the numbers are in the log")
}

// TestGuidePathAsSent: GET and the PUT answer name an on_disk index's
// guide as the client would: the path it sent plus the guide's suffix
// when the guide lies beside the index, guide_dir/NAME in the guide
// directory; never the server's resolved path.
func TestGuidePathAsSent(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "testdata", "ondisk", "clustered_l2.faiss"))
	require.NoError(t, err)
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "c.faiss"), src, 0o644))

	_, ts := newTestServer(t, Config{DataRoots: []string{root}})
	r := call(t, ts, "PUT", "/indexes/c", `{"path":"sub/c.faiss","mode":"on_disk","compression":"4x"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	for _, r := range []resp{r, call(t, ts, "GET", "/indexes/c", ""), call(t, ts, "GET", "/indexes", "")} {
		assert.Contains(t, r.Raw, `"path":"sub/c.faiss.4x.guide"`)
		assert.NotContains(t, r.Raw, root)
	}
	assert.FileExists(t, filepath.Join(root, "sub", "c.faiss.4x.guide"))

	guides := t.TempDir()
	_, ts = newTestServer(t, Config{DataRoots: []string{root}, GuideDir: guides})
	r = call(t, ts, "PUT", "/indexes/c", `{"path":"sub/c.faiss","mode":"on_disk","compression":"8x"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	g, _ := r.Body["guide"].(map[string]any)
	require.NotNil(t, g, r.Raw)
	p, _ := g["path"].(string)
	assert.True(t, strings.HasPrefix(p, "guide_dir/") && strings.HasSuffix(p, ".8x.guide"), p)
	assert.FileExists(t, filepath.Join(guides, strings.TrimPrefix(p, "guide_dir/")))
	assert.NotContains(t, r.Raw, guides)
	assert.NotContains(t, r.Raw, root)
}

// TestListDecodeErrors: a vector or a filter's ids of the wrong JSON type,
// or holding one, name the field and what it must be, not Go types.
func TestListDecodeErrors(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/j", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	vec := vectorJSON(make([]float64, 32))
	for _, c := range []struct{ path, body, reason string }{
		{"/indexes/j/_search", `{"vector":` + vec + `,"filter":{"ids":[1.5]}}`, "filter.ids: id 1.5 is not an integer in range"},
		{"/indexes/j/_search", `{"vector":` + vec + `,"filter":{"ids":"x"}}`, "filter.ids must be a list of integers, got a string"},
		{"/indexes/j/_search", `{"vector":[1,"a"]}`, "vector: each value must be a number, got a string"},
		{"/indexes/j/_search", `{"vector":{}}`, "vector must be a list of numbers, got an object"},
		{"/indexes/j/_search", `{"vector":[1e999]}`, "vector: value 1e999 is not a number in range"},
		{"/indexes/j/_msearch", `{"vectors":[[1,"a"]]}`, "vector: each value must be a number, got a string"},
	} {
		r := call(t, ts, "POST", c.path, c.body)
		assert.Equal(t, 400, r.Status, "%s: %s", c.body, r.Raw)
		e, _ := r.Body["error"].(map[string]any)
		require.NotNil(t, e, r.Raw)
		assert.Equal(t, c.reason, e["reason"], "%s", c.body)
	}
}
