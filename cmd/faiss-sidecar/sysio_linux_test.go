package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcessIO(t *testing.T) {
	read1, rss, err := processIO()
	require.NoError(t, err)
	assert.Positive(t, rss, "VmRSS")
	assert.GreaterOrEqual(t, read1, int64(0))
	read2, _, err := processIO()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, read2, read1, "read_bytes went backwards")
}

func TestEvictPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, make([]byte, 1<<16), 0o644))
	require.NoError(t, evictPageCache(path))
	err := evictPageCache(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestProcField(t *testing.T) {
	b := []byte("rchar: 10\nread_bytes: 4096\nwrite_bytes: 0\n")
	assert.Equal(t, int64(4096), procField(b, "read_bytes:"))
	assert.Equal(t, int64(0), procField(b, "VmRSS:"), "a missing field")
}
