package httpapi

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

func (s *Server) recoverPanics(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving request", "path", c.Request.URL.Path, "panic", fmt.Sprint(p))
			s.fail(c, errInternal())
		}
	}()
	c.Next()
}

func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status := c.Writer.Status()
	code := statusCodes[min(max(status, 0), len(statusCodes)-1)]
	if code == "" {
		code = strconv.Itoa(status)
	}
	s.metrics.request(route, code).add(pickStripe(), 1)
	if s.log.Enabled(c.Request.Context(), slog.LevelDebug) { // its arguments allocate even when off
		s.log.Debug("request", "method", c.Request.Method, "path", c.Request.URL.Path, "status", status, "took", time.Since(start))
	}
}

// statusCodes spells HTTP status codes for metric labels without allocating.
var statusCodes = func() []string {
	t := make([]string, 600)
	for i := 100; i < len(t); i++ {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

// adminBodyBytes bounds the bodies of the requests that are not searches
// (loads, switches): small JSON objects, read before any admission
// control, so a flood of large ones cannot hold max_body_bytes each.
const adminBodyBytes = 64 << 10

// limitBody refuses at once a body announced over its route's limit
// (bodyLimit), and bounds the body's reads by it. A body that will not be
// read (too large, or sent to a route that takes none) closes the
// connection after the answer: otherwise net/http reads what is left of
// it before answering, to reuse the connection, and a client that waits
// for the answer before sending the body gets it only at the read timeout.
func (s *Server) limitBody(c *gin.Context) {
	limit := s.bodyLimit(c)
	if n := c.Request.ContentLength; n > limit {
		c.Header("Connection", "close")
		s.fail(c, errTooLarge("body_too_large", fmt.Sprintf("request body of %d bytes exceeds %d bytes", n, limit)))
		return
	}
	if c.Request.ContentLength != 0 && !readsBody(c) {
		c.Header("Connection", "close")
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	c.Next()
}

// readsBody reports whether c's route reads a request body.
func readsBody(c *gin.Context) bool {
	switch c.FullPath() {
	case "/indexes/:name":
		return c.Request.Method == http.MethodPut
	case "/_aliases":
		return c.Request.Method == http.MethodPost
	case "/indexes/:name/_mode", "/indexes/:name/_search", "/indexes/:name/_msearch", "/_msearch":
		return true
	}
	return false
}

// bodyLimit is the largest body c's route takes.
func (s *Server) bodyLimit(c *gin.Context) int64 {
	if r := c.FullPath(); strings.HasSuffix(r, "/_search") || strings.HasSuffix(r, "/_msearch") {
		return s.cfg.MaxBodyBytes
	}
	return min(s.cfg.MaxBodyBytes, adminBodyBytes)
}

func (s *Server) auth(c *gin.Context) {
	if s.cfg.Token == "" {
		return
	}
	if subtle.ConstantTimeCompare([]byte(c.GetHeader("Authorization")), s.bearer) != 1 {
		s.fail(c, errUnauthorized("a valid bearer token is required"))
	}
}
