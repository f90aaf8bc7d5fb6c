package httpapi

import (
	"os"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestMain runs gin in release mode, as the binary does (cmd sets it: a
// library changes no process-wide setting), so that tests and benchmarks
// do not print every route they register.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}
