package buildinfo

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/faiss-sidecar/faiss-sidecar", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	i := fromBuildInfo(bi, true)
	assert.Equal(t, Info{Version: "v0.3.0", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-01-02T03:04:05Z",
		Modified: true, Go: "go1.26.0"}, i)
	assert.Equal(t, "faiss-sidecar v0.3.0 rev 0123456789ab (modified) 2026-01-02T03:04:05Z go1.26.0", i.String())

	b, err := json.Marshal(i)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":"v0.3.0","revision":"0123456789abcdef0123456789abcdef01234567","time":"2026-01-02T03:04:05Z","modified":true,"go":"go1.26.0"}`, string(b))

	bi.Settings[3].Value = "false"
	assert.Equal(t, "faiss-sidecar v0.3.0 rev 0123456789ab 2026-01-02T03:04:05Z go1.26.0", fromBuildInfo(bi, true).String())
}

// TestNoVCS: `go run`, `go test` and builds outside a checkout record no
// revision; the version still names the program and the toolchain.
func TestNoVCS(t *testing.T) {
	i := fromBuildInfo(nil, false)
	assert.Equal(t, Info{Version: "(devel)", Go: runtime.Version()}, i)
	assert.Equal(t, "faiss-sidecar (devel) "+runtime.Version(), i.String())
	assert.Equal(t, "faiss-sidecar (devel) go1.26.0",
		fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.0"}, true).String())
}

func TestGetIsTheRunningBinary(t *testing.T) {
	i := Get()
	assert.Equal(t, runtime.Version(), i.Go)
	assert.NotEmpty(t, i.Version)
	assert.Equal(t, i.String(), Version())
}
