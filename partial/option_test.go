package partial

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMessagesForUsers: option errors match ErrBadOption without its
// text, and opening a directory says what it is; no package prefix.
func TestMessagesForUsers(t *testing.T) {
	err := BadOptionf("unknown mode %q (known: a, b)", "turbo")
	assert.True(t, errors.Is(err, ErrBadOption))
	assert.Equal(t, `unknown mode "turbo" (known: a, b)`, err.Error())
	dir := t.TempDir()
	_, err = OpenFile(dir)
	require.Error(t, err)
	assert.Equal(t, dir+" is a directory, not a regular file", err.Error())
	_, err = OpenFile(filepath.Join(dir, "none"))
	require.ErrorIs(t, err, os.ErrNotExist)
	for _, e := range []error{ErrBadOption, ErrFileChanged} {
		assert.NotContains(t, e.Error(), "partial:")
	}
}
