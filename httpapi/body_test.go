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
