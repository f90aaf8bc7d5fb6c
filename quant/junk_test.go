package quant

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGuideJunkNotEchoed: a file in a guide's place that is no guide is
// refused as corrupt without its bytes in the message.
func TestGuideJunkNotEchoed(t *testing.T) {
	ds := fixture(t, "hnsw_flat_l2")
	src := srcOf(t, ds)
	path := filepath.Join(t.TempDir(), "g")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("JUNKMARK"), 64), 0o644))
	_, err := Load(path, src)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "not a guide file")
	assert.NotContains(t, err.Error(), "JUNK")
}
