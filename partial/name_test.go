package partial_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// TestNamed: a storage opened under a name (storage.Options.Name,
// partial.Named) names its file by it in every error, not by its path:
// at the open, at a check that finds the file changed and at a read that
// fails because of it; the errors keep their kinds.
func TestNamed(t *testing.T) {
	const name = "as/sent.faiss"
	for _, op := range append(changeOpeners, struct {
		name string
		o    storage.Options
		zstd bool
	}{"memory", storage.Options{Backend: "memory"}, false}) {
		t.Run(op.name, func(t *testing.T) {
			o := op.o
			o.Name = name
			missing := filepath.Join(t.TempDir(), "missing.faiss")
			_, err := storage.Open(context.Background(), missing, o)
			require.ErrorIs(t, err, fs.ErrNotExist)
			assert.Contains(t, err.Error(), name)
			assert.NotContains(t, err.Error(), missing)
			if op.name == "memory" {
				return // a private copy: no later check
			}

			s, path, _ := changeable(t, op.o, op.zstd)
			require.NoError(t, s.Close())
			s, err = storage.Open(context.Background(), path, o)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, os.Truncate(path, 0))
			_, rerr := s.ReadAtContext(context.Background(), make([]byte, 4096), 512<<10, nil)
			cerr := s.(partial.FileChecker).CheckFile(context.Background())
			for _, err := range []error{rerr, cerr} {
				require.ErrorIs(t, err, partial.ErrFileChanged)
				assert.Contains(t, err.Error(), name)
				assert.NotContains(t, err.Error(), filepath.Dir(path))
			}
		})
	}
}
