package httpapi

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCacheDirReachesLoads: the server's cache directory settings are
// checked when it starts (here, a budget refused); a local file's load
// ignores them (TestS3TierMetrics shows an object's load uses them).
func TestCacheDirReachesLoads(t *testing.T) {
	abs, err := filepath.Abs(fixtures)
	require.NoError(t, err)
	_, err = New(Config{DataRoots: []string{abs}, CacheDir: t.TempDir(), CacheDirBytes: -1})
	require.ErrorContains(t, err, "disk cache budget -1 is negative")

	s2, err := New(Config{DataRoots: []string{abs}, CacheDir: t.TempDir(), CacheDirBytes: 1 << 20})
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, s2.Reg.Load("x", LoadSpec{Path: filepath.Join(abs, "hnsw_flat_large.faiss")}), "a local file ignores the cache directory")
}

// TestCacheDirClaimedAtStart: a server claims its cache directory when it
// starts: one whose directory another process holds fails to start,
// naming it, rather than failing each s3:// load with a 500; and a
// server's Close lets the next one have it.
func TestCacheDirClaimedAtStart(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{DataRoots: []string{mustAbs(t, fixtures)}, CacheDir: dir})
	require.NoError(t, err)
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.Error(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), "held by the server")
	s.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), "released by Close") // now "another process"
	_, err = New(Config{DataRoots: []string{mustAbs(t, fixtures)}, CacheDir: dir})
	require.ErrorContains(t, err, "another process")
	require.ErrorContains(t, err, dir)
}
