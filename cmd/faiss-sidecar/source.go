package main

import (
	"context"
	"errors"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// backendHelp documents --backend for every subcommand.
var backendHelp = "storage backend: " + backendNames() + " (default: zstd for compressed files, " + string(engine.DefaultPlainBackend) + " otherwise)"

// backendNames lists the backends' names for a flag's help.
func backendNames() string {
	var names []string
	for _, b := range engine.Backends() {
		names = append(names, string(b))
	}
	return strings.Join(names, ", ")
}

// openSource opens path's raw storage (inspect, bench storage) through the
// named backend ("" = auto), with cd's disk cache for an s3:// path, and
// names the backend; indexes open through the engine's load.
func openSource(path, backend string, cacheBytes int64, cd cacheDirFlags) (partial.Storage, engine.Backend, error) {
	s, name, err := engine.OpenRaw(context.Background(), path, engine.RawOptions{Backend: engine.Backend(backend), CacheBytes: cacheBytes, CacheDir: cd.value(), Env: procEnv})
	if errors.Is(err, engine.ErrBadStorageOption) {
		return nil, "", badOption(err)
	}
	return s, name, err
}
