package filekind

import (
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOf(t *testing.T) {
	dir := t.TempDir()
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, "a directory", Of(st.Mode()))
	st, err = os.Stat("/dev/null")
	require.NoError(t, err)
	assert.Equal(t, "a device", Of(st.Mode()))
	assert.Equal(t, "a named pipe", Of(fs.ModeNamedPipe))
	assert.Equal(t, "a socket", Of(fs.ModeSocket))
	assert.Equal(t, "a symbolic link", Of(fs.ModeSymlink))
	assert.Equal(t, "a regular file", Of(0o644))
}
