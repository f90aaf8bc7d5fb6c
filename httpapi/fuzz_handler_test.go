package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fuzzMethods and fuzzPaths are what FuzzHandler picks requests from; the
// fuzzer's bytes choose among them and supply names and bodies.
var (
	fuzzMethods = []string{"GET", "PUT", "POST", "DELETE", "HEAD", "PATCH", "OPTIONS"}
	fuzzPaths   = []string{"/indexes/%s", "/indexes/%s/_search", "/indexes/%s/_msearch", "/indexes/%s/_mode",
		"/indexes/%s/_warmup", "/indexes", "/_health", "/metrics", "/", "/%s", "/_msearch", "/_aliases", "/indexes/f,%s*/_search"}
)

// documented5xx are the 5xx answers a request may get by design: an index
// whose file changed (503) and a search or switch past its deadline (504).
var documented5xx = map[int]bool{503: true, 504: true}

// fuzzHeapLimit bounds the live heap while fuzzing: requests must not grow
// the server's memory with what they ask for.
const fuzzHeapLimit = 512 << 20

// FuzzHandler sends random requests (method, path, body) to the whole HTTP
// handler, with a served index the requests may search, switch or delete.
// Every answer must be a JSON error envelope or a success, never a 5xx but
// the documented ones, and the heap must stay bounded.
//
//	go test -run='^$' -fuzz=FuzzHandler -fuzztime=5m ./httpapi
func FuzzHandler(f *testing.F) {
	abs, err := filepath.Abs(fixtures)
	require.NoError(f, err)
	s, err := New(Config{DataRoots: []string{abs}, MemoryBudget: 256 << 20, RequestTimeout: 2 * time.Second})
	require.NoError(f, err)
	f.Cleanup(s.Close)
	h := s.Handler()
	q := vectorJSON(make([]float64, 32))
	seeds := []struct {
		m, p uint8
		name string
		body string
	}{
		{2, 1, "f", `{"vector":` + q + `,"k":3}`},
		{2, 1, "f", `{"vector":` + q + `,"k":-1}`},
		{2, 1, "f", `{"vector":` + q + `,"k":10000000000}`},
		{2, 2, "f", `{"vectors":[` + q + `,` + q + `],"k":0}`},
		{2, 2, "f", `{"vectors":[` + q + `],"k":10000,"method_parameters":{"ef_search":100000}}`},
		{1, 3, "f", `{"verify_queries":1000000000}`},
		{1, 3, "f", `{"mode":"full"}`},
		{1, 0, "g", `{"path":"hnsw_flat_ip.faiss","mode":"full"}`},
		{1, 0, "g", `{"path":"/etc/shadow"}`},
		{1, 0, "\xff\xfe", `{"path":"hnsw_flat_l2.faiss"}`},
		{3, 0, "f", ``},
		{2, 4, "f", ``},
		{0, 7, "", ``},
		{2, 1, "f", `{"vector":` + q + `,"filter":{"ids":[1,2,3]},"rescore":{"oversample_factor":2}}`},
		{2, 1, "f", `{"vector":` + q + `,"max_distance":4.5,"filter":{"ids":[1,2,3]}}`},
		{2, 1, "f", `{"vector":` + q + `,"min_score":0.2,"method_parameters":{"ef_search":64}}`},
		{2, 1, "f", `{"vector":` + q + `,"k":3,"min_score":-1e39,"max_distance":null}`},
		{2, 2, "f", `{"vectors":[` + q + `,` + q + `],"max_distance":1e38}`},
		{2, 1, "f", `{"vector_b64":"` + b64Floats(make([]float64, 32)) + `","k":3}`},
		{2, 1, "f", `{"vector_b64":"AACAfw==","k":3}`},
		{2, 2, "f", `{"vectors_b64":["` + b64Floats(make([]float64, 32)) + `","AAAA"],"k":2}`},
		{2, 10, "", `{"index":"f,g*"}` + "\n" + `{"vector":` + q + `,"k":3,"filters":{"f":{"ids":[1]}}}` + "\n" + `{"index":["nope"]}` + "\n" + `{"vector":` + q + `}`},
		{2, 11, "", `{"actions":[{"add":{"index":"f","alias":"s"}},{"remove":{"index":"*","alias":"s*"}}]}`},
		{2, 12, "x", `{"vector":` + q + `,"min_score":0.2,"allow_partial_results":false}`},
		{2, 12, "x", `{"vector_b64":"` + b64Floats(make([]float64, 32)) + `","k":2,"filters":{"f":{"ids":[3]}}}`},
		{2, 10, "", `{"index":"f"}` + "\n" + `{"vector_b64":"AACAfw=="}` + "\n" + `{"index":"f*"}` + "\n" + `{"vector_b64":"` + b64Floats(make([]float64, 32)) + `","max_distance":1}`},
	}
	for _, sd := range seeds {
		f.Add(sd.m, sd.p, sd.name, []byte(sd.body))
	}
	heap := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	f.Fuzz(func(t *testing.T, m, p uint8, name string, body []byte) {
		if s.Reg.get("f") == nil {
			if err := s.Reg.Load("f", LoadSpec{Path: "hnsw_flat_l2.faiss"}); err != nil {
				t.Fatalf("reload: %v", err)
			}
		}
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		path := strings.ReplaceAll(fuzzPaths[int(p)%len(fuzzPaths)], "%s", escapeName(name))
		req, err := http.NewRequest(method, "http://x"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 && !documented5xx[w.Code] {
			t.Fatalf("%s %s %.200q: %d %s", method, path, body, w.Code, w.Body.String())
		}
		if w.Code >= 400 && method != "HEAD" && !strings.Contains(w.Body.String(), `"error":{`) {
			t.Fatalf("%s %s %.200q: %d without the error envelope: %.300s", method, path, body, w.Code, w.Body.String())
		}
		rtmetrics.Read(heap)
		if v := heap[0].Value.Uint64(); v > fuzzHeapLimit {
			t.Fatalf("%s %s %.200q: live heap %d bytes after the request", method, path, body, v)
		}
	})
}

// escapeName percent-escapes what a URL path cannot hold as it is, so the
// server sees name itself.
func escapeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`%/?#"<>\^`+"`{|}", c) >= 0 {
			b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[c>>4])+string("0123456789abcdef"[c&15])))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
