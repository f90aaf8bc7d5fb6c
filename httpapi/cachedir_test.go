package httpapi

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCacheDirReachesLoads: the server's cache directory settings reach
// every load's engine spec (here, a budget the engine refuses).
func TestCacheDirReachesLoads(t *testing.T) {
	abs, err := filepath.Abs(fixtures)
	require.NoError(t, err)
	s, err := New(Config{DataRoots: []string{abs}, CacheDir: t.TempDir(), CacheDirBytes: -1})
	require.NoError(t, err)
	defer s.Close()
	err = s.Reg.Load("x", LoadSpec{Path: filepath.Join(abs, "hnsw_flat_large.faiss")})
	require.ErrorContains(t, err, "disk cache budget -1 is negative")

	s2, err := New(Config{DataRoots: []string{abs}, CacheDir: t.TempDir(), CacheDirBytes: 1 << 20})
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, s2.Reg.Load("x", LoadSpec{Path: filepath.Join(abs, "hnsw_flat_large.faiss")}), "a local file ignores the cache directory")
}
