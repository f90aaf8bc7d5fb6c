package httpapi

import (
	"net/http/pprof"
	"strings"

	"github.com/gin-gonic/gin"
)

// named refuses, with a 400, a request whose index name is not one an
// index may have, before the handler sees it.
func (s *Server) named(h gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := checkName(c.Param("name")); err != nil {
			s.fail(c, err)
			return
		}
		h(c)
	}
}

// pprofHandler serves every /debug/pprof endpoint: the index, the named
// profiles, and the four that are functions of their own.
func pprofHandler(c *gin.Context) {
	switch strings.TrimPrefix(c.Param("path"), "/") {
	case "cmdline":
		pprof.Cmdline(c.Writer, c.Request)
	case "profile":
		pprof.Profile(c.Writer, c.Request)
	case "symbol":
		pprof.Symbol(c.Writer, c.Request)
	case "trace":
		pprof.Trace(c.Writer, c.Request)
	default:
		pprof.Index(c.Writer, c.Request)
	}
}
