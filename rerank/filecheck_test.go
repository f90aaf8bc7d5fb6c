package rerank

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// TestVectorFileChanged: a vector file truncated or rewritten
// under a Store fails Fetch and Rescore with an error wrapping
// partial.ErrFileChanged on every strategy; over mmap the fault on the
// truncated mapping is recovered instead of killing the process. A file
// replaced by rename is reported by CheckFile.
func TestVectorFileChanged(t *testing.T) {
	_, want := flatVectors(t, filepath.Join(fixtures, "hnsw_flat_large.faiss"))
	labels := []int32{2999, 0, 17, 1500}
	for _, strat := range Strategies {
		for _, change := range []string{"truncate", "rewrite", "rename"} {
			t.Run(strat+"/"+change, func(t *testing.T) {
				path := writeVecFile(t, want)
				s, err := Open(path, strat)
				require.NoError(t, err)
				defer s.Close()
				got := make([]float32, len(labels)*64)
				require.NoError(t, s.Fetch(labels, got, nil))
				require.NoError(t, s.CheckFile(context.Background()))
				switch change {
				case "truncate":
					require.NoError(t, os.Truncate(path, 4096))
				case "rewrite": // same size, other vectors
					b, err := os.ReadFile(path)
					require.NoError(t, err)
					for i := 4096; i < len(b); i++ {
						b[i] ^= 0x5a
					}
					f, err := os.OpenFile(path, os.O_WRONLY, 0)
					require.NoError(t, err)
					_, err = f.WriteAt(b[4096:], 4096)
					require.NoError(t, err)
					require.NoError(t, f.Close())
				case "rename":
					other := writeVecFile(t, want)
					require.NoError(t, os.Rename(other, path))
					require.ErrorIs(t, s.CheckFile(context.Background()), partial.ErrFileChanged)
				}
				err = s.Fetch(labels, got, nil)
				require.ErrorIs(t, err, partial.ErrFileChanged)
				assert.Contains(t, err.Error(), path)
				_, err = s.Rescore(make([]float32, 64), labels, 2, false, nil)
				require.ErrorIs(t, err, partial.ErrFileChanged)
				require.ErrorIs(t, s.CheckFile(context.Background()), partial.ErrFileChanged)
			})
		}
	}
}
