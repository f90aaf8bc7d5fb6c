package httpapi

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// b64Floats is v's float32 components, little-endian, in padded base64.
func b64Floats(v []float64) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// b64Code is a binary index's query (bytes as values) in padded base64.
func b64Code(v []float64) string {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestDecodeB64: padded and unpadded standard base64 decode; any other
// spelling of the bytes (line breaks, set bits past the last byte, the URL
// alphabet, padding where its length says none) is refused, naming where.
func TestDecodeB64(t *testing.T) {
	raw := []byte{0, 0, 0x80, 0x3f, 0xff, 0xfe, 0x7d}
	for _, s := range []string{base64.StdEncoding.EncodeToString(raw), base64.RawStdEncoding.EncodeToString(raw)} {
		got, err := decodeB64(nil, []byte(s))
		require.NoError(t, err, s)
		assert.Equal(t, raw, got, s)
	}
	got, err := decodeB64(make([]byte, 0, 64), nil)
	require.NoError(t, err)
	assert.Empty(t, got)

	dst := make([]byte, 0, 16) // decoded into dst's array
	got, err = decodeB64(dst, []byte("AACAPw=="))
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0x80, 0x3f}, got)
	assert.Same(t, &dst[:1][0], &got[0])

	for s, at := range map[string]string{
		"AACAPw=\n=":   "character 7",
		"AACA\r\nPw==": "character 4",
		"AB==":         "character 2", // B's low bits would be dropped
		"AACAPw=":      "character 6",
		"AACAP":        "character 4",
		"AA-_":         "character 2",
		"AA*A":         "character 2",
		"AA A":         "character 2",
		"=AAA":         "character 0",
	} {
		_, err := decodeB64(nil, []byte(s))
		require.Error(t, err, "%q", s)
		assert.Contains(t, err.Error(), "not standard base64", "%q", s)
		assert.Contains(t, err.Error(), at, "%q", s)
	}
	_, err = decodeB64(nil, []byte(strings.Repeat("A", 4*maxB64Bytes/3+4)))
	assert.ErrorContains(t, err, "more than 262144 bytes")
}

// FuzzDecodeB64: decodeB64 takes exactly the padded and the unpadded
// standard encodings of a byte string (one spelling each), and gives
// those bytes.
//
//	go test -run='^$' -fuzz=FuzzDecodeB64 -fuzztime=1m ./httpapi
func FuzzDecodeB64(f *testing.F) {
	for _, s := range []string{"", "AA", "AAA", "AAAA", "AACAPw==", "AACAPw", "AB==", "AAAA\nAAAA", "AA\r\nAA", "-_-_", "////+++=", "A", "=", "AAAAA==="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := decodeB64(make([]byte, 0, 3), []byte(s))
		canonical := func(e *base64.Encoding) bool {
			b, err := e.DecodeString(s)
			return err == nil && e.EncodeToString(b) == s
		}
		switch {
		case err != nil && (canonical(base64.StdEncoding) || canonical(base64.RawStdEncoding)):
			t.Fatalf("%q refused: %v", s, err)
		case err == nil && base64.StdEncoding.EncodeToString(got) != s && base64.RawStdEncoding.EncodeToString(got) != s:
			t.Fatalf("%q taken for %x, whose encodings it is not", s, got)
		case err != nil && !strings.Contains(err.Error(), "base64"):
			t.Fatalf("%q: %v", s, err)
		}
	})
}

// TestValueStrings: the strings counted for the decode bound are a body's
// values, not its keys; escaped quotes do not end one.
func TestValueStrings(t *testing.T) {
	for body, want := range map[string][2]int64{
		`{"vector":[1,2],"k":3}`:                {0, 0},
		`{"vector_b64" : "AAAA","k":3}`:         {1, 4},
		`{"vectors_b64":["AAAA","BB\"B",""]}`:   {3, 9},
		`{"a\\":"x"}`:                           {1, 1},
		`{"vectors_b64":["AAAA`:                 {1, 4},
		`{"k\"ey" :1, "v":"\\\\", "w" :  "x" }`: {2, 5},
	} {
		n, chars := valueStrings([]byte(body))
		assert.Equal(t, want, [2]int64{n, chars}, body)
	}
}

// TestVectorB64Search: vector_b64 (padded, unpadded, with JSON escapes)
// and vectors_b64 answer exactly what the same vectors as decimal JSON
// answer, on a float index and (packed code bytes) on a binary one.
func TestVectorB64Search(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/f", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/b", `{"path":"bin_hnsw.faiss","space_type":"hamming"}`).Status)
	hits := func(path, body string) any {
		t.Helper()
		r := call(t, ts, "POST", path, body)
		require.Equal(t, 200, r.Status, "%s %.200s: %s", path, body, r.Raw)
		if h, ok := r.Body["hits"]; ok {
			return h
		}
		return r.Body["responses"]
	}
	for name, c := range map[string]struct {
		index string
		qs    [][]float64
		enc   func([]float64) string
	}{
		"float":  {"f", loadRuns(t, "hnsw_flat_l2").Queries[:4], b64Floats},
		"binary": {"b", loadRuns(t, "bin_hnsw").Queries[:4], b64Code},
	} {
		var dec, enc []string
		for _, q := range c.qs {
			b64 := c.enc(q)
			want := hits("/indexes/"+c.index+"/_search", `{"vector":`+vectorJSON(q)+`,"k":5}`)
			require.NotEmpty(t, want, name)
			for _, v := range []string{b64, strings.TrimRight(b64, "="), strings.ReplaceAll(b64, "/", `\/`)} {
				assert.Equal(t, want, hits("/indexes/"+c.index+"/_search", `{"vector_b64":"`+v+`","k":5}`), "%s %s", name, v)
				assert.Equal(t, want, hits("/indexes/"+c.index+"/_search", `{"k":5, "vector_b64" : "`+v+`" ,"profile":false}`), "%s %s", name, v)
			}
			dec, enc = append(dec, vectorJSON(q)), append(enc, `"`+b64+`"`)
		}
		want := hits("/indexes/"+c.index+"/_msearch", `{"vectors":[`+strings.Join(dec, ",")+`],"k":3}`)
		assert.Equal(t, want, hits("/indexes/"+c.index+"/_msearch", `{"vectors_b64":[`+strings.Join(enc, ",")+`],"k":3}`), name)
		// The slow path (radial, which the fast parser leaves to
		// encoding/json) decodes them the same.
		want = hits("/indexes/"+c.index+"/_msearch", `{"vectors":[`+strings.Join(dec, ",")+`],"max_distance":1e9}`)
		assert.Equal(t, want, hits("/indexes/"+c.index+"/_msearch", `{"vectors_b64":[`+strings.Join(enc, ",")+`],"max_distance":1e9}`), name)
		want = hits("/indexes/"+c.index+"/_search", `{"vector":`+dec[0]+`,"max_distance":1e9}`)
		assert.Equal(t, want, hits("/indexes/"+c.index+"/_search", `{"vector_b64":`+enc[0]+`,"max_distance":1e9}`), name)
	}
}

// TestVectorB64Errors: each misuse of vector_b64 and vectors_b64 is a 400
// naming the field and, for a length, the numbers; in an _msearch a vector
// of the wrong length fails alone.
func TestVectorB64Errors(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/f", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/b", `{"path":"bin_hnsw.faiss","space_type":"hamming"}`).Status)
	q := loadRuns(t, "hnsw_flat_l2").Queries[0]
	good := b64Floats(q)
	nan, inf := append([]float64(nil), q...), append([]float64(nil), q...)
	nan[3], inf[31] = math.NaN(), math.Inf(1)
	for _, c := range []struct{ path, body, reason string }{
		{"f/_search", `{"vector":` + vectorJSON(q) + `,"vector_b64":"` + good + `"}`, "give vector or vector_b64, not both"},
		{"f/_search", `{"vector_b64":"` + good + `","vector":[]}`, "give vector or vector_b64, not both"},
		{"f/_msearch", `{"vectors":[` + vectorJSON(q) + `],"vectors_b64":["` + good + `"]}`, "give vectors or vectors_b64, not both"},
		{"f/_search", `{"vector_b64":"AAAAAAAA"}`, "vector_b64 holds 6 bytes, not a whole number of float32 values (4 bytes each); index hnsw_flat_l2.faiss expects 32 values (128 bytes)"},
		{"f/_search", `{"vector_b64":"` + b64Floats(q[:4]) + `"}`, "vector_b64 holds 4 float32 values (16 bytes), index hnsw_flat_l2.faiss expects 32 (128 bytes)"},
		{"f/_search", `{"vector_b64":""}`, "vector_b64 holds 0 float32 values (0 bytes), index hnsw_flat_l2.faiss expects 32 (128 bytes)"},
		{"f/_search", `{"vector_b64":"` + b64Floats(nan) + `"}`, "vector_b64 value 3 (NaN) is not a finite float32"},
		{"f/_search", `{"vector_b64":"` + b64Floats(inf) + `"}`, "vector_b64 value 31 (+Inf) is not a finite float32"},
		{"b/_search", `{"vector_b64":"AAAA"}`, "vector_b64 holds 3 bytes, index bin_hnsw.faiss expects 8 (its 64-bit codes)"},
		{"f/_search", `{"vector_b64":null}`, "vector_b64 must be a base64 string, not null"},
		{"f/_search", `{"vector_b64":[1,2]}`, "vector_b64 must be a base64 string, got an array"},
		{"f/_search", `{"vector_b64":"AA*A"}`, "vector_b64: not standard base64 (A–Z, a–z, 0–9, '+', '/', '=' padding optional): bad character or length at character 2"},
		{"f/_search", "{\"vector_b64\":\"AAAA\nAAAA\"}", "invalid JSON"},
		{"f/_search", `{"vector_b64":"AAAA\nAAAA"}`, "vector_b64: not standard base64 (A–Z, a–z, 0–9, '+', '/', '=' padding optional): bad character or length at character 4"},
		{"f/_search", `{"vector_b64":"AAAA\\nAAAA"}`, "vector_b64: not standard base64"},
		{"f/_search", `{"vector_b64":"AAAA","vector_b64":"AAAA"}`, `duplicate field "vector_b64"`},
		{"f/_search", `{"Vector_b64":"AAAA"}`, `unknown field "Vector_b64"`},
		{"f/_search", `{"vectors_b64":["AAAA"]}`, `unknown field "vectors_b64"`},
		{"f/_msearch", `{"vector_b64":"AAAA"}`, `unknown field "vector_b64"`},
		{"f/_msearch", `{"vectors_b64":null}`, "vectors_b64 must be a list of base64 strings, not null"},
		{"f/_msearch", `{"vectors_b64":"AAAA"}`, "vectors_b64 must be a list of base64 strings, got a string"},
		{"f/_msearch", `{"vectors_b64":["` + good + `",null]}`, "vectors_b64[1] must be a base64 string, not null"},
		{"f/_msearch", `{"vectors_b64":["` + good + `",7]}`, "vectors_b64[1] must be a base64 string, got a number"},
		{"f/_msearch", `{"vectors_b64":["` + good + `","A"]}`, "vectors_b64[1]: not standard base64"},
		{"f/_msearch", `{"vectors_b64":[]}`, "vectors_b64 must hold at least one vector"},
	} {
		r := call(t, ts, "POST", "/indexes/"+c.path, c.body)
		if assert.Equal(t, 400, r.Status, "%s %.120s: %s", c.path, c.body, r.Raw) {
			assert.Contains(t, r.Body["error"].(map[string]any)["reason"], c.reason, "%s %.120s", c.path, c.body)
		}
	}

	// In an _msearch, a vector of the wrong length or a non-finite one
	// fails alone, naming its place.
	r := call(t, ts, "POST", "/indexes/f/_msearch", `{"vectors_b64":["`+good+`","`+b64Floats(q[:31])+`","`+b64Floats(nan)+`"],"k":2}`)
	require.Equal(t, 200, r.Status, r.Raw)
	out := r.Body["responses"].([]any)
	require.Len(t, out, 3)
	assert.Contains(t, out[0], "hits")
	assert.Contains(t, r.Raw, "vectors_b64[1] holds 31 float32 values (124 bytes), index hnsw_flat_l2.faiss expects 32 (128 bytes)")
	assert.Contains(t, r.Raw, "vectors_b64[2] value 3 (NaN) is not a finite float32")
}

// TestVectorB64Charge: base64 vectors are charged as decimal ones are:
// while decoding, a bound on what it makes (3 bytes per 4 characters and
// an element per string), then what it made, until the answer; an
// _msearch of more strings than max_msearch_vectors is a 400 before it is
// decoded, and one that could never fit beside its body a 413.
func TestVectorB64Charge(t *testing.T) {
	s, ts := newTestServer(t, Config{Limits: Limits{MaxBodiesInFlight: 4 << 20}})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/f", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	v := `"` + b64Floats(make([]float64, 784)) + `"`
	for _, n := range []int{1, 30, 500} {
		raw := `{"vectors_b64":[` + strings.TrimSuffix(strings.Repeat(v+",", n), ",") + `],"k":10}`
		c := newTestContext("/indexes/f/_msearch", raw)
		var b body
		var req MSearchRequest
		require.NoError(t, s.decode(c, &req, &b))
		require.Len(t, req.VectorsB64, n)
		assert.Nil(t, b.buf, "the body is dropped once decoded")
		assert.GreaterOrEqual(t, b.held, int64(n*784*4), "its vectors are charged")
		assert.Equal(t, decodedBytes(&req), b.held)
		assert.Equal(t, b.held, s.bodyMem.used.Load())
		s.release(&b)
		assert.Zero(t, s.bodyMem.used.Load())
	}
	c := newTestContext("/indexes/f/_search", `{"vector_b64":`+v+`}`)
	var b body
	var req SearchRequest
	require.NoError(t, s.decode(c, &req, &b))
	assert.Len(t, req.VectorB64.b, 784*4)
	assert.Equal(t, decodedBytes(&req), b.held)
	s.release(&b)

	many := `{"vectors_b64":[` + strings.TrimSuffix(strings.Repeat(`"",`, 1001), ",") + `],"k":1}`
	r := call(t, ts, "POST", "/indexes/f/_msearch", many)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "max_msearch_vectors): the body holds 1001 strings")
	assert.Zero(t, s.bodyMem.used.Load())

	big := `{"vectors_b64":[` + strings.TrimSuffix(strings.Repeat(v+",", 700), ",") + `],"k":1}` // 2.9 MB of text, 2.2 MB of bytes
	r = call(t, ts, "POST", "/indexes/f/_msearch", big)
	assert.Equal(t, 413, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "request_too_large")
	assert.Zero(t, s.bodyMem.used.Load())

	wide := `{"vector_b64":"` + strings.Repeat("AAAA", 600000) + `"}` // 2.4 MB of text, 1.8 MB of bytes
	r = call(t, ts, "POST", "/indexes/f/_search", wide)
	assert.Equal(t, 413, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "request_too_large")
	assert.Zero(t, s.bodyMem.used.Load())
}

// newTestContext is a gin context for a POST of body to path.
func newTestContext(path, body string) *gin.Context {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("POST", path, strings.NewReader(body))
	return c
}

// TestMsearchMatchesSearch: each answer of an _msearch is the answer of
// the same vector alone, k-NN and radial, with a rerank's statistics its
// own: its queries share a scratch per worker, each one's hits and rerank
// reads copied out of it before the next.
func TestMsearchMatchesSearch(t *testing.T) {
	_, ts := newTestServer(t, Config{GuideDir: t.TempDir()})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/f", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/od", `{"path":"hnsw_flat_l2.faiss","mode":"on_disk","compression":"4x","rerank":{"oversample_factor":2}}`).Status)
	qs := loadRuns(t, "hnsw_flat_l2").Queries[:12]
	var vecs []string
	for _, q := range qs {
		vecs = append(vecs, `"`+b64Floats(q)+`"`)
	}
	for _, c := range []struct{ index, params string }{
		{"f", `"k":5`}, {"f", `"max_distance":1e9`}, {"od", `"k":3,"profile":true`}, {"od", `"k":7`},
	} {
		r := call(t, ts, "POST", "/indexes/"+c.index+"/_msearch", `{"vectors_b64":[`+strings.Join(vecs, ",")+`],`+c.params+`}`)
		require.Equal(t, 200, r.Status, r.Raw)
		out := r.Body["responses"].([]any)
		require.Len(t, out, len(qs))
		for i, v := range vecs {
			one := call(t, ts, "POST", "/indexes/"+c.index+"/_search", `{"vector_b64":`+v+`,`+c.params+`}`)
			require.Equal(t, 200, one.Status, one.Raw)
			got := out[i].(map[string]any)
			assert.Equal(t, one.Body["hits"], got["hits"], "%s %s query %d", c.index, c.params, i)
			if p, ok := one.Body["profile"].(map[string]any); ok {
				rr := got["profile"].(map[string]any)["rerank"].(map[string]any)
				assert.Equal(t, p["rerank"].(map[string]any)["vectors"], rr["vectors"], "%s query %d", c.index, i)
			}
		}
	}
}

// tookRE matches the timings of an answer, the one part that differs
// between two requests for the same hits.
var tookRE = regexp.MustCompile(`"took":[0-9.e+-]+`)

// sameButTook asserts that two answers are the same bytes, their "took"
// aside.
func sameButTook(t *testing.T, want, got, what string) {
	t.Helper()
	assert.Equal(t, tookRE.ReplaceAllString(want, `"took":0`), tookRE.ReplaceAllString(got, `"took":0`), what)
}

// TestVectorB64ManyIndexes: a search of many indexes and each search of
// an NDJSON POST /_msearch take vector_b64 too, and answer the bytes the
// same vectors as decimal JSON answer (k-NN and radial, a list, a pattern
// and an alias, filters, a single index, a missing one); a vector_b64 that
// does not fit fails in each index, naming it, as a decimal one does, and
// in an _msearch alone.
func TestVectorB64ManyIndexes(t *testing.T) {
	l2 := loadSegments(t)["l2"]
	_, ts := newSegmentServer(t, Config{})
	for i := range 4 {
		loadSegment(t, ts, fmt.Sprintf("l2-%d", i), "l2", i)
	}
	require.Equal(t, 200, call(t, ts, "POST", "/_aliases", `{"actions":[{"add":{"indices":["l2-1","l2-2"],"alias":"s"}}]}`).Status)
	raw := func(path, body string) string {
		t.Helper()
		r := call(t, ts, "POST", path, body)
		require.Equal(t, 200, r.Status, "%s %.200s: %s", path, body, r.Raw)
		return r.Raw
	}
	dec := func(q []float64, rest string) string { return `{"vector":` + vectorJSON(q) + rest + `}` }
	enc := func(q []float64, rest string) string { return `{"vector_b64":"` + b64Floats(q) + `"` + rest + `}` }
	rests := []string{`,"k":10`, `,"k":5,"filter":{"ids":[1,2,3,40,41,42]}`, `,"k":10,"filters":{"l2-0":{"ids":[]},"l2-1":{"ids":[7,8,9]}}`,
		`,"max_distance":1e9`, `,"min_score":0.001,"allow_partial_results":false`}
	for q := range 3 {
		for _, targets := range []string{"l2-0,l2-1,l2-2,l2-3", "l2-*", "s,l2-0", "_all"} {
			for _, rest := range rests {
				path := "/indexes/" + targets + "/_search"
				want := raw(path, dec(l2.Queries[q], rest))
				require.Contains(t, want, `"_shards"`)
				sameButTook(t, want, raw(path, enc(l2.Queries[q], rest)), path+rest)
				unpadded := `{"vector_b64":"` + strings.TrimRight(b64Floats(l2.Queries[q]), "=") + `"` + rest + `}`
				sameButTook(t, want, raw(path, unpadded), path+rest+" unpadded")
			}
		}
	}

	var decLines, encLines []string
	for q, head := range []string{`{"index":"l2-*"}`, `{"index":"nope"}`, `{"index":["l2-0"]}`, `{"index":["s","l2-0"]}`, `{"index":"l2-3"}`} {
		rest := rests[q%len(rests)]
		decLines = append(decLines, head, dec(l2.Queries[q], rest))
		encLines = append(encLines, head, enc(l2.Queries[q], rest))
	}
	want := raw("/_msearch", ndjson(decLines...))
	require.Contains(t, want, `"status":404`)
	sameButTook(t, want, raw("/_msearch", ndjson(encLines...)), "NDJSON _msearch")

	// A vector that does not fit: each index fails naming itself, the
	// search with the first (every index failed); in an _msearch, that
	// search alone.
	short := enc(l2.Queries[0][:5], `,"k":3`)
	r := call(t, ts, "POST", "/indexes/l2-1,l2-0/_search", short)
	require.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "vector_b64 holds 5 float32 values (20 bytes), index "+segFile("l2", 0)+" expects 16 (64 bytes)")
	for _, targets := range []string{"l2-1,l2-0", "l2-1,nope", "nope,l2-*"} {
		d := call(t, ts, "POST", "/indexes/"+targets+"/_search", dec(l2.Queries[0][:5], `,"k":3`))
		r = call(t, ts, "POST", "/indexes/"+targets+"/_search", short)
		assert.Equal(t, d.Status, r.Status, "%s: %s", targets, r.Raw)
		assert.Equal(t, d.Body["error"].(map[string]any)["type"], r.Body["error"].(map[string]any)["type"], targets)
	}
	r = call(t, ts, "POST", "/_msearch", ndjson(`{"index":"l2-*"}`, short, `{"index":"l2-*"}`, enc(l2.Queries[0], `,"k":3`)))
	require.Equal(t, 200, r.Status, r.Raw)
	var out struct{ Responses []json.RawMessage }
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &out))
	require.Len(t, out.Responses, 2)
	assert.Contains(t, string(out.Responses[0]), `"status":400`)
	assert.Contains(t, string(out.Responses[0]), "vector_b64 holds 5 float32 values")
	assert.Contains(t, string(out.Responses[1]), `"status":200`)

	// Each line is held to _search's rules: both forms, a bad string.
	for bad, why := range map[string]string{
		ndjson(`{"index":"l2-0"}`, `{"vector":[1],"vector_b64":"AAAA"}`):                       "line 2: give vector or vector_b64, not both",
		ndjson(`{"index":"l2-0"}`, `{"vector_b64":"AAAA","vector":[1]}`):                       "line 2: give vector or vector_b64, not both",
		ndjson(`{"index":"l2-0"}`, `{"vector_b64":"AA*A"}`):                                    "line 2: vector_b64: not standard base64",
		ndjson(`{"index":"l2-0"}`, `{"vector_b64":null}`):                                      "line 2: vector_b64 must be a base64 string, not null",
		ndjson(`{"index":"l2-0"}`, `{"vectors_b64":["AAAA"]}`):                                 `line 2: unknown field "vectors_b64"`,
		ndjson(`{"index":"l2-0"}`, enc(l2.Queries[0], ""), `{"index":"l2-0"}`, `{"x":"AAAA"}`): "line 4: unknown field",
	} {
		r := call(t, ts, "POST", "/_msearch", bad)
		if assert.Equal(t, 400, r.Status, "%.80q: %s", bad, r.Raw) {
			assert.Contains(t, r.Body["error"].(map[string]any)["reason"], why, "%.80q", bad)
		}
	}
}

// TestVectorB64ChargeNDJSON: the searches of an NDJSON POST /_msearch
// charge their base64 vectors as decimal ones: a bound while decoding
// (3 bytes per 4 characters), then the bytes each holds, until the
// answer; a body whose strings could never fit beside it is a 413.
func TestVectorB64ChargeNDJSON(t *testing.T) {
	s, ts := newSegmentServer(t, Config{Limits: Limits{MaxBodiesInFlight: 4 << 20, MaxMsearchVectors: 1000}})
	loadSegment(t, ts, "l2-0", "l2", 0)
	v := b64Floats(make([]float64, 784))
	for _, n := range []int{1, 30, 200} {
		var lines []string
		for range n {
			lines = append(lines, `{"index":"l2-*"}`, `{"vector_b64":"`+v+`","k":10}`)
		}
		c := newTestContext("/_msearch", ndjson(lines...))
		var b body
		var req msearchLines
		require.NoError(t, s.decode(c, &req, &b))
		require.Len(t, req.reqs, n)
		assert.Len(t, req.reqs[n-1].VectorB64.b, 784*4)
		assert.Nil(t, b.buf, "the body is dropped once decoded")
		assert.GreaterOrEqual(t, b.held, int64(n*784*4), "its vectors are charged")
		assert.Equal(t, decodedBytes(&req), b.held)
		assert.Equal(t, b.held, s.bodyMem.used.Load())
		s.release(&b)
		assert.Zero(t, s.bodyMem.used.Load())
	}
	var lines []string
	for range 700 { // 2.9 MB of text, 2.2 MB of bytes
		lines = append(lines, `{"index":"l2-0"}`, `{"vector_b64":"`+v+`","k":1}`)
	}
	r := call(t, ts, "POST", "/_msearch", ndjson(lines...))
	assert.Equal(t, 413, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "request_too_large")
	assert.Zero(t, s.bodyMem.used.Load())
}
