package httpapi

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the API's router: the middleware every request goes
// through, then the endpoints, with JSON answers for a path or a method
// none serves.
func (s *Server) routes() *gin.Engine {
	e := gin.New()
	e.RedirectTrailingSlash = false // a JSON 404, not an HTML redirect
	e.Use(s.recoverPanics, s.accessLog, s.limitBody)
	for _, m := range []string{http.MethodGet, http.MethodHead} { // HEAD for probes that only look at the status
		e.Handle(m, "/", s.root)
		e.Handle(m, "/_health", s.health)
		e.Handle(m, "/metrics", gin.WrapH(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
		e.Handle(m, "/_openapi", s.openAPI) // docs/openapi.yaml
	}
	if s.cfg.Pprof {
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} { // POST: pprof/symbol
			e.Handle(m, "/debug/pprof/*path", s.auth, pprofHandler)
		}
	}
	api := e.Group("/", s.auth)
	api.GET("/indexes", s.listIndexes)
	api.GET("/indexes/:name", s.named(s.getIndex))
	api.PUT("/indexes/:name", s.named(s.loadIndex))
	api.DELETE("/indexes/:name", s.named(s.deleteIndex))
	api.POST("/indexes/:name/_search", s.targeted(s.searchTargets))
	api.POST("/indexes/:name/_msearch", s.named(s.msearch))
	api.PUT("/indexes/:name/_mode", s.named(s.switchMode))
	api.POST("/indexes/:name/_warmup", s.named(s.warmup))
	api.POST("/_msearch", s.msearchAll)
	api.GET("/_aliases", s.getAliases)
	api.POST("/_aliases", s.postAliases)
	e.NoRoute(func(c *gin.Context) {
		s.fail(c, errNotFound("no_route", fmt.Sprintf("no endpoint %s %s", c.Request.Method, c.Request.URL.Path)))
	})
	e.NoMethod(func(c *gin.Context) {
		s.fail(c, errMethodNotAllowed(fmt.Sprintf("%s is not allowed on %s", c.Request.Method, c.Request.URL.Path)))
	})
	e.HandleMethodNotAllowed = true
	return e
}

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
