package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDefaultRemoteGuideDir: an s3:// index's guides go, without a guide
// directory, to the user cache directory's faiss-sidecar/guides; with no
// user cache directory there is no default (the engine refuses the load,
// naming guide_dir: TestS3OnDiskGuide).
func TestDefaultRemoteGuideDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	assert.Equal(t, filepath.Join(cache, "faiss-sidecar", "guides"), defaultRemoteGuideDir())
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	assert.Empty(t, defaultRemoteGuideDir())
}
