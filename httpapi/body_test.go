package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBodyCharge: a body is charged the buffer it is read into, which never
// grows past its announced length (+1); once decoded it is dropped, and
// the vectors decoding made are charged in its place until release.
func TestBodyCharge(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	for _, n := range []int{1, 30, 1000} {
		var sb strings.Builder
		sb.WriteString(`{"vectors":[`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("[" + strings.TrimSuffix(strings.Repeat("0,", 784), ",") + "]")
		}
		sb.WriteString(`],"k":10}`)
		raw := sb.String()
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest("POST", "/indexes/x/_msearch", strings.NewReader(raw))

		var b body
		require.NoError(t, s.read(c, &b))
		assert.Equal(t, raw, string(b.buf.b))
		assert.Equal(t, int64(cap(b.buf.b)), b.held, "the buffer is what is charged")
		assert.Equal(t, len(raw)+1, cap(b.buf.b), "grown (each body is larger than the last) to the announced length (+1), never past it")
		assert.Equal(t, b.held, s.bodyMem.used.Load())
		s.release(&b)
		assert.Zero(t, s.bodyMem.used.Load())

		c.Request = httptest.NewRequest("POST", "/indexes/x/_msearch", strings.NewReader(raw))
		var req MSearchRequest
		require.NoError(t, s.decode(c, &req, &b))
		require.Len(t, req.Vectors, n)
		assert.Nil(t, b.buf, "the body is dropped once decoded")
		assert.GreaterOrEqual(t, b.held, int64(n*784*8), "its vectors are charged")
		assert.Equal(t, decodedBytes(&req), b.held)
		assert.Equal(t, b.held, s.bodyMem.used.Load())
		s.release(&b)
		assert.Zero(t, s.bodyMem.used.Load())
	}
}

// TestDecodeBound: an _msearch is refused before it is decoded when its
// arrays outnumber max_msearch_vectors (a body of "[0]" vectors decoded to
// 10-15 times its size, uncharged), or when what it may decode to is more
// than max_bodies_in_flight could ever hold beside the body itself (a 413,
// not a 429 to retry);
// either way every byte charged is given back.
func TestDecodeBound(t *testing.T) {
	s, ts := newTestServer(t, Config{Limits: Limits{MaxBodiesInFlight: 4 << 20}})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/f", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	tiny := `{"vectors":[` + strings.TrimSuffix(strings.Repeat("[0],", 1001), ",") + `],"k":1}`
	r := call(t, ts, "POST", "/indexes/f/_msearch", tiny)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "max_msearch_vectors")
	assert.Zero(t, s.bodyMem.used.Load())

	v := "[" + strings.TrimSuffix(strings.Repeat("0,", 784), ",") + "]"
	big := `{"vectors":[` + strings.TrimSuffix(strings.Repeat(v+",", 700), ",") + `],"k":1}` // 1.1 MB of text, 4.4 MB of float64s
	r = call(t, ts, "POST", "/indexes/f/_msearch", big)
	assert.Equal(t, 413, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "request_too_large")
	assert.Contains(t, r.Raw, "max_bodies_in_flight")
	assert.Zero(t, s.bodyMem.used.Load())

	// A search whose bound alone fits, but not beside its own body, on an
	// idle server: 413, not a 429 to retry for ever.
	wide := `{"vector":[` + strings.TrimSuffix(strings.Repeat("1,", 450000), ",") + `],"k":1}` // 900 kB of text, a 3.6 MB bound
	r = call(t, ts, "POST", "/indexes/f/_search", wide)
	assert.Equal(t, 413, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "request_too_large")
	assert.Zero(t, s.bodyMem.used.Load())

	// The 413 counts the body, not its buffer: chunked (no announced
	// length), the buffer grows by doubling past the body, and one that fits
	// only without that slack is decoded in a buffer of its size (here to
	// the parser's own limit on values).
	fits := `{"vector":[` + strings.TrimSuffix(strings.Repeat("1,", 400000), ",") + `],"k":1}` // 800 kB of text, a 3.2 MB bound
	for _, chunked := range []bool{false, true} {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest("POST", "/indexes/f/_search", strings.NewReader(fits))
		if chunked {
			c.Request.ContentLength = -1
		}
		var b body
		var req SearchRequest
		err := s.decode(c, &req, &b)
		require.Error(t, err, "chunked %v", chunked)
		assert.Contains(t, err.Error(), "more than 65536 values", "chunked %v: decoded, not refused as too large", chunked)
		assert.Zero(t, s.bodyMem.used.Load())
	}

	ok := `{"vectors":[` + strings.TrimSuffix(strings.Repeat("["+strings.TrimSuffix(strings.Repeat("0.5,", 32), ",")+"],", 3), ",") + `],"k":2}`
	r = call(t, ts, "POST", "/indexes/f/_msearch", ok)
	assert.Equal(t, 200, r.Status, r.Raw)
	assert.Zero(t, s.bodyMem.used.Load())
}

// TestLongReasonCut: an error that quotes a huge number from the body is
// cut to maxReason bytes, saying how long it was.
func TestLongReasonCut(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/f", `{"path":"hnsw_flat_l2.faiss"}`).Status)
	r := call(t, ts, "POST", "/indexes/f/_search", `{"vector":[1`+strings.Repeat("1", 100000)+`,"x"],"k":1}`)
	assert.Equal(t, 400, r.Status)
	reason, _ := r.Body["error"].(map[string]any)["reason"].(string)
	assert.LessOrEqual(t, len(reason), maxReason+40, reason)
	assert.Contains(t, reason, "bytes in all)")
}
