package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

const fixtures = "../testdata/fixtures"

func newTestServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.DataRoots == nil {
		abs, _ := filepath.Abs(fixtures)
		cfg.DataRoots = []string{abs}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	return s, ts
}

type resp struct {
	Status      int
	Body        map[string]any
	Raw         string
	ContentType string
}

func call(t *testing.T, ts *httptest.Server, method, path, body string, hdr ...string) resp {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	raw, _ := io.ReadAll(r.Body)
	out := resp{Status: r.StatusCode, Raw: string(raw), ContentType: r.Header.Get("Content-Type")}
	json.Unmarshal(raw, &out.Body)
	return out
}

type fixtureRuns = testfixtures.Search

func loadRuns(t testing.TB, name string) fixtureRuns {
	f, err := testfixtures.Load(fixtures, name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func vectorJSON(v []float64) string { b, _ := json.Marshal(v); return string(b) }

// searchBody is a search request for a fixture run's query, without its
// closing brace: k, the per-query ef_search and the filter when set.
func searchBody(q []float64, k int, ef *int, allow []int64) string {
	body := fmt.Sprintf(`{"vector":%s,"k":%d`, vectorJSON(q), k)
	if ef != nil {
		body += fmt.Sprintf(`,"method_parameters":{"ef_search":%d}`, *ef)
	}
	if allow != nil {
		b, _ := json.Marshal(allow)
		body += `,"filter":{"ids":` + string(b) + `}`
	}
	return body
}

// TestSearchMatchesFAISS: the REST search returns FAISS 1.7.3's results
// (faiss-1.7.3 semantics, exact kernel) with OpenSearch's l2 score.
func TestSearchMatchesFAISS(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	if r := call(t, ts, "PUT", "/indexes/v", `{"path":"idmap_hnsw.faiss","mode":"full","semantics":"faiss-1.7.3","kernel":"exact"}`); r.Status != 200 {
		t.Fatalf("load: %d %s", r.Status, r.Raw)
	}
	f := loadRuns(t, "idmap_hnsw")
	for _, ri := range []int{1, 5, 7} { // k=10; ef 16 params; a filter
		run := f.Runs[ri]
		for qi, q := range f.Queries {
			body := searchBody(q, run.K, run.EfSearch, run.AllowIDs)
			r := call(t, ts, "POST", "/indexes/v/_search", body+`,"profile":true}`)
			if r.Status != 200 || r.ContentType != "application/json; charset=utf-8" {
				t.Fatalf("search: %d (%s) %s", r.Status, r.ContentType, r.Raw)
			}
			hits := r.Body["hits"].([]any)
			n := 0
			for j, id := range run.IDs[qi] {
				if id < 0 {
					continue
				}
				h := hits[j].(map[string]any)
				d := h["distance"].(float64)
				if int64(h["id"].(float64)) != id || float32(d) != float32(run.Dist[qi][j]) || h["score"].(float64) != 1/(1+float64(float32(d))) {
					t.Fatalf("run %d query %d rank %d: %v, FAISS (%d, %v)", ri, qi, j, h, id, run.Dist[qi][j])
				}
				n++
			}
			if len(hits) != n || r.Body["profile"].(map[string]any)["ndis"].(float64) <= 0 {
				t.Fatalf("%d hits for %d FAISS results, profile %v", len(hits), n, r.Body["profile"])
			}
		}
	}
	// _msearch returns the same, in order.
	var vs []string
	for _, q := range f.Queries[:5] {
		vs = append(vs, vectorJSON(q))
	}
	r := call(t, ts, "POST", "/indexes/v/_msearch", `{"vectors":[`+strings.Join(vs, ",")+`],"k":10}`)
	if r.Status != 200 {
		t.Fatalf("msearch %d %s", r.Status, r.Raw)
	}
	for i, one := range r.Body["responses"].([]any) {
		first := one.(map[string]any)["hits"].([]any)[0].(map[string]any)
		if int64(first["id"].(float64)) != f.Runs[1].IDs[i][0] {
			t.Fatalf("msearch %d: %v", i, first)
		}
	}
}

func TestVectorParsing(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []float64
		ok   bool
	}{{"[1, -2.5e3 ,0.25]", []float64{1, -2500, 0.25}, true}, {" [ ] ", []float64{}, true}, {"null", nil, true},
		{"[1,]", nil, false}, {"[01]", nil, false}, {"[+1]", nil, false}, {`["1"]`, nil, false}, {"[1 2]", nil, false}, {"[1e999]", nil, false}} {
		var v Vector
		err := v.UnmarshalJSON([]byte(c.in))
		if (err == nil) != c.ok || (c.ok && len(v) != len(c.want)) {
			t.Errorf("%q: %v %v", c.in, v, err)
		}
		for i := range c.want {
			if v[i] != c.want[i] {
				t.Errorf("%q: %v", c.in, v)
			}
		}
	}
}

func TestScores(t *testing.T) {
	for _, c := range []struct {
		space string
		d     float32
		want  float64
	}{{"l2", 3, 0.25}, {"hamming", 4, 0.2}, {"innerproduct", -1, 0.5}, {"innerproduct", 2, 3}, {"cosinesimil", 0.5, 0.75}, {"cosinesimil", -2, 0}} {
		if got := score(c.space, c.d); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("score(%s, %v) = %v, want %v", c.space, c.d, got, c.want)
		}
	}
}

// TestBadRequests: every bad request gets the error envelope with a clear
// reason, and nothing unloads the served index.
func TestBadRequests(t *testing.T) {
	root := t.TempDir()
	src, _ := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	os.WriteFile(filepath.Join(root, "idx.faiss"), src, 0o644)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.faiss"), src, 0o644)
	os.Symlink(filepath.Join(outside, "secret.faiss"), filepath.Join(root, "link.faiss"))
	os.WriteFile(filepath.Join(root, "trunc.faiss"), src[:5000], 0o644)
	flat, _ := os.ReadFile(filepath.Join(fixtures, "flat_l2.faiss"))
	os.WriteFile(filepath.Join(root, "flat.faiss"), flat, 0o644)
	os.Mkdir(filepath.Join(root, "dir"), 0o755)
	_, ts := newTestServer(t, Config{DataRoots: []string{root}, Token: "s3cret", MaxBodyBytes: 1 << 16})
	auth := []string{"Authorization", "Bearer s3cret"}
	if r := call(t, ts, "PUT", "/indexes/i", `{"path":"idx.faiss"}`, auth...); r.Status != 200 {
		t.Fatalf("load: %s", r.Raw)
	}
	q := vectorJSON(make([]float64, 32))
	for _, c := range []struct {
		method, path, body string
		status             int
		reason             string
	}{
		{"POST", "/indexes/i/_search", `{"vector":` + q + `}`, 401, "bearer token"},
		{"POST", "/indexes/i/_search", `{"vector":[1,2]`, 400, "invalid JSON: the body ends inside a value"},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"kk":3}`, 400, `unknown field "kk"`},
		{"POST", "/indexes/i/_search", `{"vector":[1,2,3]}`, 400, "vector has 3 values, index idx.faiss expects 32"},
		{"POST", "/indexes/i/_search", `{"vector":` + strings.Replace(q, "0", "1e39", 1) + `}`, 400, "is not a finite float32"},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":20000}`, 400, "k=20000 is out of range"},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"method_parameters":{"ef_search":-4}}`, 400, "ef_search=-4 is out of range [1, 100000]"},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"method_parameters":{"ef_search":100001}}`, 400, "ef_search=100001 is out of range"},
		// k: an explicit 0, null or negative k is a 400; so is a huge one,
		// before anything is sized by it.
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":0}`, 400, "k=0 is out of range [1, 10000]"},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":null}`, 400, "k is null"},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":-1}`, 400, "k=-1 is out of range"},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":10000000000}`, 400, "k=10000000000 is out of range"},
		{"POST", "/indexes/i/_search", `{"vector":` + q + `,"k":1e30}`, 400, "k must be an integer, got a number 1e30"},
		{"POST", "/indexes/i/_msearch", `{"vectors":[` + q + `],"k":-1}`, 400, "k=-1 is out of range"},
		{"POST", "/indexes/i/_msearch", `{"vectors":[` + q + `],"k":0}`, 400, "k=0 is out of range"},
		{"POST", "/indexes/i/_msearch", `{"vectors":[` + q + `],"k":10000000000}`, 400, "k=10000000000 is out of range"},
		{"POST", "/indexes/i/_msearch", `{"vectors":[]}`, 400, "at least one vector"},
		{"POST", "/indexes/i/_msearch", `{"vectors":[` + strings.Repeat(`[0],`, 1000) + `[0]]}`, 400, "_msearch has 1001 vectors, at most 1000"},
		{"POST", "/indexes/i/_msearch", `{"vectors":[` + strings.Repeat(`[0],`, 104) + `[0]],"k":10000}`, 400, "above the limit of 1048576 (max_request_work)"},
		// Names.
		{"PUT", "/indexes/%ff%fe", `{"path":"idx.faiss"}`, 400, "not valid UTF-8"},
		{"PUT", "/indexes/a*b", `{"path":"idx.faiss"}`, 400, `character '*' is not allowed`},
		{"PUT", "/indexes/a%23b", `{"path":"idx.faiss"}`, 400, `character '#' is not allowed`},
		{"PUT", "/indexes/a%20b", `{"path":"idx.faiss"}`, 400, `character ' ' is not allowed`},
		{"PUT", "/indexes/a%00b", `{"path":"idx.faiss"}`, 400, `is not allowed`},
		{"PUT", "/indexes/a%E2%80%8Bb", `{"path":"idx.faiss"}`, 400, `character '\u200b' is not allowed`}, // zero-width space
		{"PUT", "/indexes/a%CD%8Fb", `{"path":"idx.faiss"}`, 400, `character '\u034f' is not allowed`},    // combining grapheme joiner, invisible
		{"PUT", "/indexes/a%EF%B8%8Fb", `{"path":"idx.faiss"}`, 400, `character '\ufe0f' is not allowed`}, // variation selector, invisible
		{"PUT", "/indexes/a%E2%80%AEb", `{"path":"idx.faiss"}`, 400, `character '\u202e' is not allowed`}, // right-to-left override
		{"PUT", "/indexes/_x", `{"path":"idx.faiss"}`, 400, "must not start with _"},
		{"PUT", "/indexes/" + strings.Repeat("n", 256), `{"path":"idx.faiss"}`, 400, "256 bytes, at most 255"},
		{"POST", "/indexes/%ff/_search", `{"vector":` + q + `}`, 400, "not valid UTF-8"},
		// Paths: outside the roots is a 403 whether or not the file exists;
		// not a regular file is a 400; not a servable index a 422.
		{"PUT", "/indexes/j", `{"path":"/etc/nope-nothing-here"}`, 403, "outside the data roots"},
		{"PUT", "/indexes/j", `{"path":"/etc/shadow"}`, 403, "outside the data roots"},
		{"PUT", "/indexes/j", `{"path":"dir"}`, 400, "is a directory, not a regular file"},
		{"PUT", "/indexes/j", `{"path":"/dev/zero"}`, 403, "outside the data roots"},
		{"PUT", "/indexes/j", `{"path":"flat.faiss"}`, 422, "has no HNSW graph"},
		{"PUT", "/indexes/j", `{"path":"nothing.faiss"}`, 404, "no file"},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","backend":"zstd"}`, 400, "backend zstd reads files in the zstd seekable format"},
		{"PUT", "/indexes/i/_mode", `{"verify_queries":1000000000}`, 400, "verify_queries=1000000000 is out of range [0, 1000]"},
		{"PUT", "/indexes/i/_mode", `{"verify_queries":-1}`, 400, "verify_queries=-1 is out of range"},
		{"POST", "/indexes/nope/_search", `{"vector":` + q + `}`, 404, `no index named "nope"`},
		{"PUT", "/indexes/j", `{"path":"link.faiss"}`, 403, "outside the data roots"},
		{"PUT", "/indexes/j", `{"path":"../etc/passwd"}`, 403, "outside the data roots"},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","mode":"warm"}`, 400, `unknown mode "warm"`},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","backend":"tape"}`, 400, `unknown backend "tape"`},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","space_type":"cosine"}`, 400, `unknown space_type "cosine"`},
		{"PUT", "/indexes/j", `{"path":"idx.faiss","space_type":"innerproduct"}`, 400, `needs a IP index, this index is L2`},
		{"PUT", "/indexes/j", `{"path":"trunc.faiss"}`, 422, "file truncated"},
		{"PUT", "/indexes/i", `{"path":"idx.faiss"}`, 409, "is loaded"},
		{"PUT", "/indexes/i/_mode", `{"mode":"full","backend":"mmap"}`, 400, "mode full reads the whole file into memory"},
		{"POST", "/indexes/i/_search", `{"vector":[` + strings.Repeat("1,", 40000) + `1]}`, 413, "exceeds 65536 bytes"},
		{"GET", "/nothing", ``, 404, "no endpoint GET /nothing"},
	} {
		hdr := auth
		if c.status == 401 {
			hdr = nil
		}
		r := call(t, ts, c.method, c.path, c.body, hdr...)
		e, _ := r.Body["error"].(map[string]any)
		if r.Status != c.status || e == nil || !strings.Contains(e["reason"].(string), c.reason) || e["type"] == "" {
			t.Errorf("%s %s %.60s: %d %s; want %d with %q", c.method, c.path, c.body, r.Status, r.Raw, c.status, c.reason)
		}
	}
	if r := call(t, ts, "POST", "/indexes/i/_search", `{"vector":`+q+`}`, auth...); r.Status != 200 {
		t.Fatalf("the index must keep serving: %d %s", r.Status, r.Raw)
	}
}

// TestMemoryBudget: a load that cannot fit is a 429 with the numbers;
// caches shrink to make room first. A cache is charged no more than it can
// hold: the file, and an eighth for the mirror.
func TestMemoryBudget(t *testing.T) {
	s, ts := newTestServer(t, Config{MemoryBudget: 2_400_000})
	if r := call(t, ts, "PUT", "/indexes/a", `{"path":"hnsw_flat_large.faiss","backend":"pread","cache_bytes":2097152}`); r.Status != 200 {
		t.Fatalf("%s", r.Raw)
	}
	_, l, _ := s.Reg.acquire("a")
	capped := l.h.x.Cache().Budget()
	l.release()
	const size = 1199386 // hnsw_flat_large.faiss
	if capped < size+size/8 || capped > size+size/8+2*4096 {
		t.Errorf("a's cache budget %d; want the 2 MiB asked capped at the mirror's need, %d", capped, size+size/8+2*4096)
	}
	// 1.2 MB file in full mode: fits only after a's cache shrinks.
	if r := call(t, ts, "PUT", "/indexes/b", `{"path":"hnsw_flat_large.faiss","mode":"full"}`); r.Status != 200 {
		t.Fatalf("load with shrink: %d %s", r.Status, r.Raw)
	}
	_, l, _ = s.Reg.acquire("a")
	if got := l.h.x.Cache().Budget(); got >= capped || got < cacheFloor {
		t.Errorf("a's cache budget %d did not shrink from %d toward the floor", got, capped)
	}
	l.release()
	r := call(t, ts, "PUT", "/indexes/c", `{"path":"hnsw_flat_large.faiss","mode":"full"}`)
	if r.Status != 429 || !strings.Contains(r.Raw, "memory budget exceeded: need") {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	// More than the whole budget can never fit: a 400, not a 429 to retry.
	_, small := newTestServer(t, Config{MemoryBudget: 1_000_000})
	r = call(t, small, "PUT", "/indexes/c", `{"path":"hnsw_flat_large.faiss","mode":"full"}`)
	if r.Status != 400 || !strings.Contains(r.Raw, "more than the node's whole budget of 1000000") || !strings.Contains(r.Raw, "memory_budget_exceeded") {
		t.Errorf("more than the whole budget: %d %s", r.Status, r.Raw)
	}
	if r := call(t, ts, "GET", "/_health", ``); r.Status != 200 || r.Body["memory_used_bytes"].(float64) > 3<<20 {
		t.Fatalf("health %s", r.Raw)
	}
}

// policyBudget is a memory_budget leaving held bytes to the policy beyond
// the Go heap's share.
func policyBudget(t *testing.T, file string, held int64) int64 {
	f, err := engine.Probe(filepath.Join(fixtures, file), "direct")
	if err != nil {
		t.Fatal(err)
	}
	p, err := hnswsearch.PlanBudget(f, true, 1<<40, runtime.GOMAXPROCS(0))
	if err != nil {
		t.Fatal(err)
	}
	return p.HeapBytes + held
}

// TestMemoryBudgetPolicy: memory_budget in a load or mode body serves the
// index under the bounded-memory policy with FAISS's results, counts whole
// against the node's budget, and is refused when too small or not
// memory_efficient.
func TestMemoryBudgetPolicy(t *testing.T) {
	budget := policyBudget(t, "idmap_hnsw.faiss", 64<<10)
	_, ts := newTestServer(t, Config{MemoryBudget: budget + budget/2})
	body := fmt.Sprintf(`{"path":"idmap_hnsw.faiss","memory_budget":%d,"semantics":"faiss-1.7.3","kernel":"exact"}`, budget)
	if r := call(t, ts, "PUT", "/indexes/p", body); r.Status != 200 {
		t.Fatalf("load: %d %s", r.Status, r.Raw)
	}
	r := call(t, ts, "GET", "/indexes/p", ``)
	mb, _ := r.Body["memory_budget"].(map[string]any)
	if r.Body["backend"] != "direct" || mb == nil || mb["budget_bytes"].(float64) != float64(budget) || r.Body["resident_bytes"].(float64) != float64(budget) {
		t.Fatalf("info %s", r.Raw)
	}
	f := loadRuns(t, "idmap_hnsw")
	run := f.Runs[1]
	for qi, q := range f.Queries {
		r := call(t, ts, "POST", "/indexes/p/_search", fmt.Sprintf(`{"vector":%s,"k":%d,"profile":true}`, vectorJSON(q), run.K))
		hits := r.Body["hits"].([]any)
		for j, id := range run.IDs[qi] {
			if id >= 0 && int64(hits[j].(map[string]any)["id"].(float64)) != id {
				t.Fatalf("query %d rank %d: %v, FAISS %d", qi, j, hits[j], id)
			}
		}
		prof := r.Body["profile"].(map[string]any)
		if _, ok := prof["bytes_vector_cache"]; !ok || prof["bytes_pinned"].(float64) <= 0 {
			t.Fatalf("profile lacks where bytes came from: %v", prof)
		}
	}
	// A second index under the same policy exceeds the node's budget.
	if r := call(t, ts, "PUT", "/indexes/q", body); r.Status != 429 {
		t.Fatalf("second load: %d %s", r.Status, r.Raw)
	}
	for _, c := range []struct{ body, msg string }{
		{`{"path":"idmap_hnsw.faiss","memory_budget":100000}`, "memory budget too small: 100000 bytes"},
		{`{"path":"idmap_hnsw.faiss","memory_budget":100000,"mode":"full"}`, "memory_budget applies to mode memory_efficient"},
		{`{"path":"idmap_hnsw.faiss","memory_budget":-1}`, "memory_budget -1 is negative"},
	} {
		if r := call(t, ts, "PUT", "/indexes/bad", c.body); r.Status != 400 || !strings.Contains(r.Raw, c.msg) {
			t.Errorf("%s: %d %s, want 400 %q", c.body, r.Status, r.Raw, c.msg)
		}
	}
	// Switching to full drops the policy; switching back re-plans it.
	if r := call(t, ts, "PUT", "/indexes/p/_mode", `{"mode":"full"}`); r.Status != 200 {
		t.Fatalf("to full: %s", r.Raw)
	}
	if r := call(t, ts, "GET", "/indexes/p", ``); r.Body["memory_budget"] != nil || r.Body["mode"] != "full" {
		t.Fatalf("after full: %s", r.Raw)
	}
	if r := call(t, ts, "PUT", "/indexes/p/_mode", fmt.Sprintf(`{"mode":"memory_efficient","memory_budget":%d}`, budget)); r.Status != 200 {
		t.Fatalf("back to the policy: %s", r.Raw)
	}
	if r := call(t, ts, "GET", "/indexes/p", ``); r.Body["memory_budget"] == nil || r.Body["backend"] != "direct" {
		t.Fatalf("after switch: %s", r.Raw)
	}
}

func TestMetricsAndDelete(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	call(t, ts, "PUT", "/indexes/m", `{"path":"hnsw_flat_l2.faiss","backend":"pread"}`)
	for range 5 { // spread over the stripes at random: the scrape sums them
		call(t, ts, "POST", "/indexes/m/_search", `{"vector":`+vectorJSON(make([]float64, 32))+`}`)
	}
	call(t, ts, "POST", "/indexes/m/_search", `{"vector":[1]}`)
	r := call(t, ts, "GET", "/metrics", ``)
	for _, want := range []string{
		`faiss_sidecar_search_seconds_count{index="m"} 5`,
		`faiss_sidecar_search_seconds_bucket{index="m",le="+Inf"} 5`,
		`faiss_sidecar_requests_total{route="/indexes/:name/_search",status="200"} 5`,
		`faiss_sidecar_requests_total{route="/indexes/:name/_search",status="400"} 1`,
		`faiss_sidecar_cache_lookups_total{index="m",result="hit"}`,
	} {
		if r.Status != 200 || !strings.Contains(r.Raw, want) {
			t.Fatalf("metrics lack %s:\n%.3000s", want, r.Raw)
		}
	}
	if r := call(t, ts, "GET", "/indexes/m", ``); r.Body["queries_served"] != 5.0 {
		t.Errorf("queries_served %v, want 5", r.Body["queries_served"])
	}
	if r := call(t, ts, "DELETE", "/indexes/m", ``); r.Status != 200 {
		t.Fatal(r.Raw)
	}
	if r := call(t, ts, "GET", "/indexes/m", ``); r.Status != 404 {
		t.Fatal(r.Raw)
	}
}

// TestCompressedIndexAutoDetected: memory_efficient with no backend serves a
// zstd-seekable file through zstd (the same rule as the CLI) and answers as
// the plain file does.
func TestCompressedIndexAutoDetected(t *testing.T) {
	if !zstd.Supported {
		t.Skip("built without cgo: no zstd")
	}
	root := t.TempDir()
	in, err := os.Open(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(root, "idx.faiss.zst"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zstd.CompressSeekable(out, in, 4096, 3, nil); err != nil {
		t.Fatal(err)
	}
	out.Close()
	abs, _ := filepath.Abs(fixtures)
	_, ts := newTestServer(t, Config{DataRoots: []string{root, abs}})
	if r := call(t, ts, "PUT", "/indexes/z", `{"path":"idx.faiss.zst"}`); r.Status != 200 || r.Body["backend"] != "zstd" {
		t.Fatalf("load: %d %s", r.Status, r.Raw)
	}
	if r := call(t, ts, "PUT", "/indexes/p", `{"path":"`+filepath.Join(abs, "hnsw_flat_l2.faiss")+`"}`); r.Status != 200 {
		t.Fatalf("load: %d %s", r.Status, r.Raw)
	}
	q := `{"vector":` + vectorJSON(loadRuns(t, "hnsw_flat_l2").Queries[0]) + `,"k":10}`
	a, b := call(t, ts, "POST", "/indexes/z/_search", q), call(t, ts, "POST", "/indexes/p/_search", q)
	if a.Status != 200 || hitsKey(a.Raw) != hitsKey(b.Raw) {
		t.Fatalf("compressed %s, plain %s", a.Raw, b.Raw)
	}
}

// TestSearchScratchReuse: a search decodes into pooled scratch that keeps
// the last vector's array; a shorter vector after a longer one is read at
// its own length, and the longer one again gives the same hits.
func TestSearchScratchReuse(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	if r := call(t, ts, "PUT", "/indexes/v", `{"path":"idmap_hnsw.faiss"}`); r.Status != 200 {
		t.Fatalf("load: %d %s", r.Status, r.Raw)
	}
	q := loadRuns(t, "idmap_hnsw").Queries[0]
	body := `{"vector":` + vectorJSON(q) + `,"k":5}`
	first := call(t, ts, "POST", "/indexes/v/_search", body)
	if first.Status != 200 {
		t.Fatalf("search: %d %s", first.Status, first.Raw)
	}
	short := call(t, ts, "POST", "/indexes/v/_search", `{"vector":[1,2,3],"k":5}`)
	if short.Status != 400 || !strings.Contains(short.Raw, fmt.Sprintf("vector has 3 values, index idmap_hnsw.faiss expects %d", len(q))) {
		t.Fatalf("short vector: %d %s", short.Status, short.Raw)
	}
	again := call(t, ts, "POST", "/indexes/v/_search", body)
	if again.Status != 200 || fmt.Sprint(again.Body["hits"]) != fmt.Sprint(first.Body["hits"]) {
		t.Fatalf("the same query again: %d %s; first %s", again.Status, again.Raw, first.Raw)
	}
}
