package httpapi

import (
	"io"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/docs"
)

// openAPIContentType is application/yaml (RFC 9512): the registered type of
// the document's syntax, which YAML-aware clients and OpenAPI validators
// decode. application/vnd.oai.openapi says more but is a vendor type few
// clients know, and application/openapi+yaml is not registered yet.
var openAPIContentType = []string{"application/yaml"}

// openAPI serves docs/openapi.yaml, the description of this API (GET
// /_openapi), as its bytes: the one copy, embedded.
func (s *Server) openAPI(c *gin.Context) {
	c.Writer.Header()["Content-Type"] = openAPIContentType
	c.Status(200)
	io.WriteString(c.Writer, docs.OpenAPI())
}
