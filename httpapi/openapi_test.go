package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openAPIFile is the one copy of the description, which the server embeds.
const openAPIFile = "../docs/openapi.yaml"

// loadOpenAPI reads docs/openapi.yaml with kin-openapi and validates the
// document itself.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	raw, err := os.ReadFile(openAPIFile)
	require.NoError(t, err)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(loader.Context), "docs/openapi.yaml is not a valid OpenAPI document")
	return doc
}

// ginParam is a gin path parameter (:name) or catch-all (*path).
var ginParam = regexp.MustCompile(`[:*](\w+)`)

// TestOpenAPIRoutes: every route the server registers (with --pprof, so
// that all are) is an operation of docs/openapi.yaml and every operation
// there is a route, so a route added without its description fails here.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	s, _ := newTestServer(t, Config{Pprof: true, Token: "t"})
	served := map[string]bool{}
	for _, r := range s.Handler().(*gin.Engine).Routes() {
		served[r.Method+" "+ginParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	described := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described[method+" "+path] = true
		}
	}
	for op := range served {
		if !described[op] {
			t.Errorf("the server serves %s, which docs/openapi.yaml does not describe", op)
		}
	}
	for op := range described {
		if !served[op] {
			t.Errorf("docs/openapi.yaml describes %s, which the server does not serve", op)
		}
	}
	require.NotEmpty(t, served)
}

// TestOpenAPIServed: GET /_openapi answers docs/openapi.yaml's bytes as
// application/yaml, without a token on a server that has one.
func TestOpenAPIServed(t *testing.T) {
	want, err := os.ReadFile(openAPIFile)
	require.NoError(t, err)
	_, ts := newTestServer(t, Config{Token: "t"})
	r, err := http.Get(ts.URL + "/_openapi")
	require.NoError(t, err)
	defer r.Body.Close()
	got, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	assert.Equal(t, 200, r.StatusCode)
	assert.Equal(t, "application/yaml", r.Header.Get("Content-Type"))
	assert.True(t, bytes.Equal(want, got), "GET /_openapi is not docs/openapi.yaml (%d bytes, want %d)", len(got), len(want))
}

// apiCase is one request of TestOpenAPIValidation and what it must get.
type apiCase struct {
	method, path, body string
	ctype              string // the body's Content-Type ("": application/json when there is a body)
	noAuth             bool   // send no token
	status             int
	typ                string // the error type expected, when status is not 2xx
	// off: the request breaks the description on purpose, and
	// openapi3filter must refuse it before the server does.
	off bool
	// slowBody sends the headers and a part of the body, then waits.
	slowBody bool
}

// specCheck drives requests at servers and validates each request and
// response with openapi3filter, recording the operations and statuses
// exercised.
type specCheck struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	seen   map[string]map[int]bool // "METHOD /path" of the document → statuses
	n      int                     // requests sent
}

func newSpecCheck(t *testing.T) *specCheck {
	doc := loadOpenAPI(t)
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return &specCheck{t: t, doc: doc, router: router, seen: map[string]map[int]bool{}}
}

// options are the validation options for a server with token ("": none).
func (sc *specCheck) options(token string) *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus:             true, // a status the operation does not list fails
		RejectWhenRequestBodyNotSpecified: true,
		SkipSettingDefaults:               true,
		MultiError:                        true,
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			if token == "" { // the server takes any request
				return nil
			}
			if in.RequestValidationInput.Request.Header.Get("Authorization") != "Bearer "+token {
				return errors.New("no valid bearer token")
			}
			return nil
		},
	}
}

// run sends c to ts (whose server has token) and validates the request and
// the response against the document; it returns the response's body.
func (sc *specCheck) run(ts *httptest.Server, token string, c apiCase) []byte {
	t := sc.t
	t.Helper()
	what := fmt.Sprintf("%s %s %.80s", c.method, c.path, c.body)
	ctype := c.ctype
	if ctype == "" && c.body != "" {
		ctype = "application/json"
	}
	header := http.Header{}
	if ctype != "" {
		header.Set("Content-Type", ctype)
	}
	if token != "" && !c.noAuth {
		header.Set("Authorization", "Bearer "+token)
	}

	// The request, as the document sees it.
	vreq := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	vreq.Header = header.Clone()
	opts := sc.options(token)
	route, params, ferr := sc.router.FindRoute(vreq)
	var rin *openapi3filter.RequestValidationInput
	var key string
	switch {
	case ferr != nil:
		// No operation: the server must answer no_route or
		// method_not_allowed, as the document's components say.
		name := map[int]string{404: "NoRoute", 405: "MethodNotAllowed"}[c.status]
		require.NotEmpty(t, name, "%s: no operation in docs/openapi.yaml (%v)", what, ferr)
		resp := sc.doc.Components.Responses[name]
		require.NotNil(t, resp, name)
		route = &routers.Route{Spec: sc.doc, Path: c.path, Method: c.method, PathItem: &openapi3.PathItem{},
			Operation: &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(c.status, resp))}}
		rin = &openapi3filter.RequestValidationInput{Request: vreq, Route: route, Options: opts}
		key = "off-spec " + name
	default:
		rin = &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
		err := openapi3filter.ValidateRequest(context.Background(), rin)
		if c.off {
			require.Error(t, err, "%s: breaks docs/openapi.yaml on purpose, yet the request validates", what)
		} else {
			require.NoError(t, err, "%s: the request does not validate", what)
		}
		key = c.method + " " + route.Path
	}

	// The request, sent.
	var res *http.Response
	if c.slowBody {
		res = sc.sendSlow(ts, c, header)
	} else {
		req, err := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		req.Header = header.Clone()
		res, err = http.DefaultClient.Do(req)
		require.NoError(t, err, what)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err, what)
	require.Equal(t, c.status, res.StatusCode, "%s: %s", what, body)
	if c.typ != "" {
		assert.Contains(t, string(body), `"type":"`+c.typ+`"`, what)
	}

	// The response, against the operation (HEAD: openapi3filter checks
	// nothing; its status must be listed still).
	require.NotNil(t, route.Operation.Responses.Status(res.StatusCode), "%s: status %d is not listed", what, res.StatusCode)
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: rin, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: opts})
	require.NoError(t, err, "%s: the response does not validate:\n%s", what, body)
	sc.n++
	if sc.seen[key] == nil {
		sc.seen[key] = map[int]bool{}
	}
	sc.seen[key][res.StatusCode] = true
	return body
}

// sendSlow sends c's headers announcing a body 100 bytes longer than c's,
// then c's body, and reads the answer the server gives while it waits for
// the rest.
func (sc *specCheck) sendSlow(ts *httptest.Server, c apiCase, header http.Header) *http.Response {
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(sc.t, err)
	sc.t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", c.method, c.path, ts.Listener.Addr(), len(c.body)+100)
	header.Write(&b)
	b.WriteString("\r\n" + c.body)
	_, err = io.WriteString(conn, b.String())
	require.NoError(sc.t, err)
	require.NoError(sc.t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(sc.t, err)
	return res
}

// TestOpenAPIValidation drives every operation of docs/openapi.yaml at
// running servers, successes and failures, and validates each request and
// response with kin-openapi's openapi3filter: what the server answers is
// what the document says, field by field.
func TestOpenAPIValidation(t *testing.T) {
	sc := newSpecCheck(t)
	fixturesAbs, err := filepath.Abs(fixtures)
	require.NoError(t, err)

	// Server A: a token, --pprof, the fixtures and a root of files to
	// break, a guide directory, 64 KiB bodies.
	const token = "s3cret"
	root := t.TempDir()
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "changing.faiss"), src, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "trunc.faiss"), src[:5000], 0o644))
	_, ts := newTestServer(t, Config{DataRoots: []string{fixturesAbs, root}, Token: token, Pprof: true,
		GuideDir: t.TempDir(), MaxBodyBytes: 1 << 16})

	q := vectorJSON(loadRuns(t, "hnsw_flat_l2").Queries[0])
	q2 := vectorJSON(loadRuns(t, "hnsw_flat_l2").Queries[1])
	qid := vectorJSON(loadRuns(t, "idmap_hnsw").Queries[0])
	qbin := vectorJSON(loadRuns(t, "bin_hnsw").Queries[0])
	b64 := `"` + b64Floats(loadRuns(t, "hnsw_flat_l2").Queries[0]) + `"`
	b64two := `"` + strings.TrimRight(b64Floats(loadRuns(t, "hnsw_flat_l2").Queries[1]), "=") + `"`
	b64bin := `"` + b64Code(loadRuns(t, "bin_hnsw").Queries[0]) + `"`
	budget := policyBudget(t, "idmap_hnsw.faiss", 64<<10)
	a := []apiCase{
		// The service's own endpoints, no token needed.
		{method: "GET", path: "/", status: 200},
		{method: "HEAD", path: "/", status: 200},
		{method: "GET", path: "/_health", status: 200},
		{method: "HEAD", path: "/_health", status: 200},
		{method: "GET", path: "/metrics", status: 200},
		{method: "HEAD", path: "/metrics", status: 200},
		{method: "GET", path: "/_openapi", status: 200},
		{method: "HEAD", path: "/_openapi", status: 200},
		{method: "GET", path: "/", body: `{"x":"` + strings.Repeat("a", 70000) + `"}`, status: 413, typ: "body_too_large", off: true},

		// Loads: every mode, and the fields each adds to the description.
		{method: "PUT", path: "/indexes/i", body: `{"path":"hnsw_flat_l2.faiss","backend":"pread","cache_bytes":1048576}`, status: 200},
		{method: "PUT", path: "/indexes/f", body: `{"path":"idmap_hnsw.faiss","mode":"full","semantics":"faiss-1.7.3","kernel":"exact","ef_search":32}`, status: 200},
		{method: "PUT", path: "/indexes/od", body: `{"path":"hnsw_flat_l2.faiss","mode":"on_disk","compression":"4x","rerank":{"oversample_factor":2}}`, status: 200},
		{method: "PUT", path: "/indexes/mb", body: fmt.Sprintf(`{"path":"idmap_hnsw.faiss","memory_budget":%d}`, budget), status: 200},
		{method: "PUT", path: "/indexes/b", body: `{"path":"bin_hnsw.faiss","space_type":"hamming"}`, status: 200},
		{method: "PUT", path: "/indexes/ch", body: `{"path":"` + filepath.Join(root, "changing.faiss") + `","backend":"pread"}`, status: 200},
		{method: "PUT", path: "/indexes/i", body: `{"path":"hnsw_flat_l2.faiss"}`, status: 409, typ: "index_exists"},
		{method: "PUT", path: "/indexes/j", body: `{"path":"/etc/passwd"}`, status: 403, typ: "forbidden_path"},
		{method: "PUT", path: "/indexes/j", body: `{"path":"nothing.faiss"}`, status: 404, typ: "file_not_found"},
		{method: "PUT", path: "/indexes/j", body: `{"path":"flat_l2.faiss"}`, status: 422, typ: "index_not_servable"},
		{method: "PUT", path: "/indexes/j", body: `{"path":"` + filepath.Join(root, "trunc.faiss") + `"}`, status: 422, typ: "bad_index_file"},
		{method: "PUT", path: "/indexes/j", body: `{"path":"hnsw_flat_l2.faiss","backend":"zstd"}`, status: 400, typ: "bad_request"},
		{method: "PUT", path: "/indexes/j", body: `{"path":"hnsw_flat_l2.faiss","mode":"warm"}`, status: 400, typ: "bad_request", off: true},
		{method: "PUT", path: "/indexes/j", body: `{"path":"hnsw_flat_l2.faiss","Mode":"full"}`, status: 400, typ: "bad_request", off: true},
		{method: "PUT", path: "/indexes/j", body: `{"path":"hnsw_flat_l2.faiss","path":"x.faiss"}`, status: 400, typ: "duplicate_field"},
		{method: "PUT", path: "/indexes/j", body: `{"path":`, status: 400, typ: "bad_request", off: true},
		{method: "PUT", path: "/indexes/_j", body: `{"path":"hnsw_flat_l2.faiss"}`, status: 400, typ: "bad_request", off: true},
		{method: "PUT", path: "/indexes/a*b", body: `{"path":"hnsw_flat_l2.faiss"}`, status: 400, typ: "bad_request", off: true},
		{method: "PUT", path: "/indexes/..", body: `{"path":"hnsw_flat_l2.faiss"}`, status: 400, typ: "bad_request", off: true},
		{method: "PUT", path: "/indexes/j", body: `{"path":"` + strings.Repeat("a", 70000) + `"}`, status: 413, typ: "body_too_large"},
		{method: "PUT", path: "/indexes/j", body: `{"path":"hnsw_flat_l2.faiss"}`, noAuth: true, status: 401, typ: "unauthorized", off: true},

		// Descriptions.
		{method: "GET", path: "/indexes", status: 200},
		{method: "GET", path: "/indexes", noAuth: true, status: 401, typ: "unauthorized", off: true},
		{method: "GET", path: "/indexes/i", status: 200},
		{method: "GET", path: "/indexes/od", status: 200},
		{method: "GET", path: "/indexes/nope", status: 404, typ: "index_not_found"},
		{method: "GET", path: "/indexes/+x", status: 400, typ: "bad_request", off: true},
		{method: "GET", path: "/indexes/.x", status: 404, typ: "index_not_found"},

		// k-NN search: parameters, filter, profile; radial; rescore; binary.
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `}`, status: 200},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"k":5,"method_parameters":{"ef_search":64},"filter":{"ids":[1,2,3,50,70]},"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"max_distance":1e9,"method_parameters":{"ef_search":16}}`, status: 200},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"min_score":0.0001,"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/od/_search", body: `{"vector":` + q + `,"k":3,"rescore":{"oversample_factor":3},"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/f/_search", body: `{"vector":` + qid + `,"k":4,"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/mb/_search", body: `{"vector":` + qid + `,"k":4,"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/b/_search", body: `{"vector":` + qbin + `,"k":4}`, status: 200},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector_b64":` + b64 + `,"k":3,"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector_b64":` + b64two + `,"min_score":0.0001}`, status: 200},
		{method: "POST", path: "/indexes/b/_search", body: `{"vector_b64":` + b64bin + `,"k":4}`, status: 200},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector_b64":"AAAA"}`, status: 400, typ: "bad_request"},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector_b64":"AA*A"}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"vector_b64":` + b64 + `}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":[1,2,3]}`, status: 400, typ: "bad_request"},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"k":0}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"k":3,"max_distance":2}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"kk":3}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"filter":null}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `,"method_parameters":{"ef_search":100001}}`, status: 400},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":[` + strings.Repeat("1,", 40000) + `1]}`, status: 413, typ: "body_too_large"},
		{method: "POST", path: "/indexes/nope/_search", body: `{"vector":` + q + `}`, status: 404, typ: "index_not_found"},
		{method: "POST", path: "/indexes/i/_search", body: `{"vector":` + q + `}`, noAuth: true, status: 401, typ: "unauthorized", off: true},

		// _msearch: k-NN with a profile, radial, one vector failing alone.
		{method: "POST", path: "/indexes/i/_msearch", body: `{"vectors":[` + q + `,` + q2 + `],"k":3,"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/i/_msearch", body: `{"vectors":[` + q + `],"max_distance":1e9}`, status: 200},
		{method: "POST", path: "/indexes/i/_msearch", body: `{"vectors":[` + q + `,[1,2]],"k":2}`, status: 200},
		{method: "POST", path: "/indexes/i/_msearch", body: `{"vectors":[]}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_msearch", body: `{"vectors_b64":[` + b64 + `,` + b64two + `,"AAAA"],"k":2}`, status: 200},
		{method: "POST", path: "/indexes/i/_msearch", body: `{"vectors_b64":[` + b64 + `],"vectors":[` + q + `]}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_msearch", body: `{"vectors_b64":[]}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i/_msearch", body: `{"vector":` + q + `}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/nope/_msearch", body: `{"vectors":[` + q + `]}`, status: 404, typ: "index_not_found"},

		// Aliases: all or none, OpenSearch's error types.
		{method: "POST", path: "/_aliases", body: `{"actions":[{"add":{"indices":["i","ch"],"alias":"pair"}},{"add":{"index":"i*","aliases":["solo"]}}]}`, status: 200},
		{method: "POST", path: "/_aliases", body: `{"actions":[{"remove":{"index":"i","alias":"solo"}}]}`, status: 200},
		{method: "GET", path: "/_aliases", status: 200},
		{method: "GET", path: "/_aliases", noAuth: true, status: 401, typ: "unauthorized", off: true},
		{method: "POST", path: "/_aliases", body: `{"actions":[{"add":{"index":"nope","alias":"x"}}]}`, status: 404, typ: "index_not_found"},
		{method: "POST", path: "/_aliases", body: `{"actions":[{"remove":{"index":"i","alias":"zz"}}]}`, status: 404, typ: "aliases_not_found"},
		{method: "POST", path: "/_aliases", body: `{"actions":[{"add":{"index":"i","alias":"f"}}]}`, status: 400, typ: "invalid_alias_name"},
		{method: "POST", path: "/_aliases", body: `{"actions":[{"add":{"index":"i"}}]}`, status: 400, typ: "bad_request"},
		{method: "POST", path: "/_aliases", body: `{"actions":[]}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/_aliases", body: `{"actions":[{"add":{"index":"i","alias":"x","routing":"1"}}]}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/_aliases", body: `{"actions":[{"add":{"index":"i","alias":"x"}}]}`, noAuth: true, status: 401, typ: "unauthorized", off: true},
		{method: "POST", path: "/_aliases", body: `{"x":"` + strings.Repeat("a", 70000) + `"}`, status: 413, typ: "body_too_large", off: true},
		{method: "PUT", path: "/indexes/pair", body: `{"path":"hnsw_flat_l2.faiss"}`, status: 400, typ: "invalid_index_name"},

		// Searches of many indexes: lists, patterns, aliases, filters,
		// partial failure, radial.
		{method: "POST", path: "/indexes/i,ch/_search", body: `{"vector":` + q + `,"k":3}`, status: 200},
		{method: "POST", path: "/indexes/pair/_search", body: `{"vector":` + q + `,"k":3,"filter":{"ids":[1,2,3]},"filters":{"ch":{"ids":[]}},"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/i,nope/_search", body: `{"vector":` + q + `,"k":3}`, status: 200},
		{method: "POST", path: "/indexes/i,nope/_search", body: `{"vector":` + q + `,"k":3,"allow_partial_results":false}`, status: 404, typ: "index_not_found"},
		{method: "POST", path: "/indexes/i*/_search", body: `{"vector":` + q + `,"max_distance":1e9,"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/_all/_search", body: `{"vector":` + q + `}`, status: 400, typ: "bad_request"},
		{method: "POST", path: "/indexes/nothing*/_search", body: `{"vector":` + q + `}`, status: 200},
		{method: "POST", path: "/indexes/i,ch/_search", body: `{"vector":` + q + `,"filters":{"zz":{"ids":[1]}}}`, status: 400, typ: "bad_request"},
		{method: "POST", path: "/indexes/i,,ch/_search", body: `{"vector":` + q + `}`, status: 400, typ: "bad_request"},
		{method: "POST", path: "/indexes/i,ch/_search", body: `{"vector":` + q + `,"filters":{"i":null}}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/i,ch/_search", body: `{"vector_b64":` + b64 + `,"k":3}`, status: 200},
		{method: "POST", path: "/indexes/pair/_search", body: `{"vector_b64":` + b64two + `,"k":3,"filters":{"ch":{"ids":[]}},"profile":true}`, status: 200},
		{method: "POST", path: "/indexes/i*/_search", body: `{"vector_b64":` + b64 + `,"min_score":0.0001}`, status: 200},
		{method: "POST", path: "/indexes/i,ch/_search", body: `{"vector_b64":"AAAA","k":3}`, status: 400, typ: "bad_request"},
		{method: "POST", path: "/indexes/i,ch/_search", body: `{"vector_b64":` + b64 + `,"vector":` + q + `}`, status: 400, typ: "bad_request", off: true},

		// _msearch: NDJSON header and body lines.
		{method: "POST", path: "/_msearch", ctype: "application/x-ndjson", body: `{"index":"pair"}` + "\n" + `{"vector":` + q + `,"k":2,"profile":true}` + "\n" +
			`{"index":["i"]}` + "\n" + `{"vector":` + q2 + `,"k":2,"profile":true}` + "\n" +
			`{"index":"nope"}` + "\n" + `{"vector":` + q + `}` + "\n" +
			`{"index":"i,ch"}` + "\n" + `{"vector":` + q + `,"max_distance":1e9}` + "\n", status: 200},
		{method: "POST", path: "/_msearch", ctype: "application/x-ndjson", body: `{"index":"pair"}` + "\n" + `{"vector_b64":` + b64 + `,"k":2}` + "\n" +
			`{"index":["i"]}` + "\n" + `{"vector_b64":` + b64two + `,"k":2,"profile":true}` + "\n" +
			`{"index":"i,ch"}` + "\n" + `{"vector_b64":"AAAA"}` + "\n" +
			`{"index":"i,ch"}` + "\n" + `{"vector_b64":` + b64 + `,"max_distance":1e9}` + "\n", status: 200},
		{method: "POST", path: "/_msearch", ctype: "application/x-ndjson", body: `{"index":"i"}` + "\n" + `{"vector":` + q + `,"vector_b64":` + b64 + `}` + "\n", status: 400, typ: "bad_request"},
		{method: "POST", path: "/_msearch", ctype: "application/x-ndjson", body: `{"index":"i"}` + "\n" + `{"vector":` + q + `,"kk":1}` + "\n", status: 400, typ: "bad_request"},
		{method: "POST", path: "/_msearch", ctype: "application/x-ndjson", body: `{"index":"i"}` + "\n", status: 400, typ: "bad_request"},
		{method: "POST", path: "/_msearch", ctype: "application/x-ndjson", body: `{"index":"i"}` + "\n" + `{"vector":[` + strings.Repeat("1,", 40000) + `1]}` + "\n", status: 413, typ: "body_too_large"},
		{method: "POST", path: "/_msearch", ctype: "application/x-ndjson", noAuth: true, body: `{"index":"i"}` + "\n" + `{"vector":` + q + `}` + "\n", status: 401, typ: "unauthorized", off: true},

		// Switches and warm-ups.
		{method: "PUT", path: "/indexes/i/_mode", body: `{"mode":"full","verify_queries":4}`, status: 200},
		{method: "PUT", path: "/indexes/f/_mode", body: `{"ef_search":-1,"warm":true}`, status: 200},
		{method: "PUT", path: "/indexes/i/_mode", body: `{"verify_queries":1000000000}`, status: 400, typ: "bad_request"},
		{method: "PUT", path: "/indexes/i/_mode", body: `{"mode":"full","backend":"mmap"}`, status: 400, typ: "bad_request"},
		{method: "PUT", path: "/indexes/i/_mode", body: `{"path":"x.faiss"}`, status: 400, typ: "bad_request", off: true},
		{method: "PUT", path: "/indexes/nope/_mode", body: `{}`, status: 404, typ: "index_not_found"},
		{method: "POST", path: "/indexes/i/_warmup", status: 200},
		{method: "POST", path: "/indexes/od/_warmup", body: `{}`, status: 200},
		{method: "POST", path: "/indexes/i/_warmup", body: `{"deep":true}`, status: 400, typ: "bad_request", off: true},
		{method: "POST", path: "/indexes/nope/_warmup", status: 404, typ: "index_not_found"},

		// Deletes.
		{method: "DELETE", path: "/indexes/b", status: 200},
		{method: "DELETE", path: "/indexes/b", status: 404, typ: "index_not_found"},
		{method: "DELETE", path: "/indexes/-b", status: 400, typ: "bad_request", off: true},

		// No such endpoint, no such method.
		{method: "GET", path: "/nothing", status: 404, typ: "no_route"},
		{method: "GET", path: "/indexes/i/_nothing", status: 404, typ: "no_route"},
		{method: "POST", path: "/indexes", body: `{}`, status: 405, typ: "method_not_allowed"},
		{method: "DELETE", path: "/_health", status: 405, typ: "method_not_allowed"},
		{method: "GET", path: "/indexes/i/_search", status: 405, typ: "method_not_allowed"},

		// pprof, behind the token.
		{method: "GET", path: "/debug/pprof/cmdline", status: 200},
		{method: "GET", path: "/debug/pprof/goroutine?debug=1", status: 200},
		{method: "HEAD", path: "/debug/pprof/cmdline", status: 200},
		{method: "POST", path: "/debug/pprof/symbol", body: "0x1", ctype: "text/plain", status: 200},
		{method: "GET", path: "/debug/pprof/nothing", status: 404},
		{method: "GET", path: "/debug/pprof/cmdline", noAuth: true, status: 401, typ: "unauthorized", off: true},
	}
	for _, c := range a {
		sc.run(ts, token, c)
	}

	// A served file that changes: GET shows the index failed, searches
	// answer 503, a reload with PUT _mode serves again.
	require.NoError(t, os.Truncate(filepath.Join(root, "changing.faiss"), 0))
	body := sc.run(ts, token, apiCase{method: "GET", path: "/indexes/ch", status: 200})
	assert.Contains(t, string(body), `"state":"failed"`)
	sc.run(ts, token, apiCase{method: "POST", path: "/indexes/ch/_search", body: `{"vector":` + q + `}`, status: 503, typ: "index_file_changed"})
	sc.run(ts, token, apiCase{method: "POST", path: "/indexes/ch/_msearch", body: `{"vectors":[` + q + `]}`, status: 503, typ: "index_file_changed"})
	body = sc.run(ts, token, apiCase{method: "POST", path: "/indexes/pair/_search", body: `{"vector":` + q + `}`, status: 200})
	assert.Contains(t, string(body), `"failures":[{"index":"ch","reason":{"type":"index_file_changed"`)
	sc.run(ts, token, apiCase{method: "POST", path: "/indexes/pair/_search", body: `{"vector":` + q + `,"allow_partial_results":false}`, status: 503, typ: "index_file_changed"})
	body = sc.run(ts, token, apiCase{method: "POST", path: "/_msearch", ctype: "application/x-ndjson",
		body: `{"index":"ch"}` + "\n" + `{"vector":` + q + `}` + "\n" + `{"index":"pair"}` + "\n" + `{"vector":` + q + `}` + "\n", status: 200})
	assert.Contains(t, string(body), `"status":503}`)
	require.NoError(t, os.WriteFile(filepath.Join(root, "changing.faiss"), src, 0o644))
	sc.run(ts, token, apiCase{method: "PUT", path: "/indexes/ch/_mode", body: `{}`, status: 200})

	// Server B: no token, a small memory budget, a short request timeout.
	_, tsB := newTestServer(t, Config{MemoryBudget: 2_000_000, RequestTimeout: 300 * time.Millisecond})
	for _, c := range []apiCase{
		{method: "PUT", path: "/indexes/x", body: `{"path":"hnsw_flat_large.faiss","mode":"full"}`, status: 200},
		{method: "PUT", path: "/indexes/y", body: `{"path":"hnsw_flat_large.faiss","mode":"full"}`, status: 429, typ: "memory_budget_exceeded"},
		{method: "PUT", path: "/indexes/y", body: `{"path":"hnsw_flat_large.faiss","mode":"full","memory_budget":1}`, status: 400, typ: "bad_request"},
		{method: "GET", path: "/indexes", status: 200},
		{method: "POST", path: "/indexes/x/_search", body: `{"vector":` + vectorJSON(loadRuns(t, "hnsw_flat_large").Queries[0]), status: 408, typ: "request_timeout", off: true, slowBody: true},
	} {
		sc.run(tsB, "", c)
	}

	// A server with room for one open file.
	_, tsFiles := newTestServer(t, Config{Limits: Limits{MaxOpenFiles: 1}})
	for _, c := range []apiCase{
		{method: "PUT", path: "/indexes/x", body: `{"path":"hnsw_flat_l2.faiss","backend":"mmap"}`, status: 200},
		{method: "PUT", path: "/indexes/y", body: `{"path":"hnsw_flat_l2.faiss","backend":"mmap"}`, status: 429, typ: "max_open_files_exceeded"},
		{method: "PUT", path: "/indexes/y", body: `{"path":"hnsw_flat_l2.faiss","backend":"direct"}`, status: 400, typ: "max_open_files_exceeded"},
	} {
		sc.run(tsFiles, "", c)
	}

	// Server C: every deadline already past.
	// Index t is loaded within the default switch_timeout (a load's reads
	// end at it), then every deadline is set before the server starts.
	absC, _ := filepath.Abs(fixtures)
	sC, err := New(Config{DataRoots: []string{absC}, RequestTimeout: time.Nanosecond})
	require.NoError(t, err)
	require.NoError(t, sC.Reg.Load("t", LoadSpec{Path: "hnsw_flat_large.faiss", Mode: "full"}))
	sC.limits.SwitchTimeout, sC.Reg.limits.SwitchTimeout = time.Nanosecond, time.Nanosecond
	tsC := httptest.NewServer(sC.Handler())
	t.Cleanup(func() { tsC.Close(); sC.Close() })
	qLarge := vectorJSON(loadRuns(t, "hnsw_flat_large").Queries[0])
	for _, c := range []apiCase{
		{method: "PUT", path: "/indexes/u", body: `{"path":"hnsw_flat_large.faiss","mode":"full"}`, status: 504, typ: "load_timeout"},
		{method: "POST", path: "/indexes/t/_search", body: `{"vector":` + qLarge + `}`, status: 504, typ: "search_timeout"},
		{method: "POST", path: "/indexes/t/_msearch", body: `{"vectors":[` + qLarge + `,` + qLarge + `]}`, status: 504, typ: "search_timeout"},
		{method: "POST", path: "/indexes/t,t*/_search", body: `{"vector":` + qLarge + `}`, status: 504, typ: "search_timeout"},
		{method: "POST", path: "/_msearch", ctype: "application/x-ndjson", body: `{"index":"t"}` + "\n" + `{"vector":` + qLarge + `}` + "\n", status: 200},
		{method: "PUT", path: "/indexes/t/_mode", body: `{"mode":"memory_efficient","verify_queries":1000}`, status: 504, typ: "switch_timeout"},
	} {
		sc.run(tsC, "", c)
	}

	// Every operation of the document was driven.
	ops, pairs, statuses := 0, 0, map[int]bool{}
	for path, item := range sc.doc.Paths.Map() {
		for method := range item.Operations() {
			ops++
			op := method + " " + path
			assert.NotEmpty(t, sc.seen[op], "%s is described but no request of this test exercises it", op)
			for s := range sc.seen[op] {
				pairs++
				statuses[s] = true
			}
		}
	}
	var lines []string
	for op, st := range sc.seen {
		codes := slices.Sorted(maps.Keys(st))
		lines = append(lines, fmt.Sprint(op, ": ", codes))
		for _, s := range codes {
			statuses[s] = true
		}
	}
	slices.Sort(lines)
	t.Logf("%d requests; %d operations, %d (operation, status) pairs; %d distinct statuses with the answers to no operation:\n%s",
		sc.n, ops, pairs, len(statuses), strings.Join(lines, "\n"))
}
