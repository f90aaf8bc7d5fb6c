package httpapi

import (
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
		`null`:             "",
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
}
