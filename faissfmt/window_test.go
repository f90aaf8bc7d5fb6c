package faissfmt

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countReads counts the reads made through it and the bytes they asked for.
type countReads struct {
	r            io.ReaderAt
	reads, bytes int64
}

func (c *countReads) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	c.bytes += int64(len(p))
	return c.r.ReadAt(p, off)
}

// TestOpenWindow: with OpenOptions.Window, every HNSW fixture parses to
// the same File, its levels, offsets and the counts around them read in
// one read (so fewer reads than streaming them); a window too small, or a
// file cut inside the span, parses as without one.
func TestOpenWindow(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.faiss"))
	require.NoError(t, err)
	n := 0
	for _, path := range paths {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		f, err := os.Open(path)
		require.NoError(t, err)
		plain := &countReads{r: f}
		want, err := OpenWith(plain, int64(len(b)), OpenOptions{AllowNullStorage: true})
		if err != nil || want.Graph == nil || want.Graph.HNSW == nil {
			f.Close()
			continue // not an HNSW index we serve
		}
		n++
		h := want.Graph.HNSW
		span := h.Neighbors.Offset - (h.Levels.Offset - 8)
		for _, c := range []struct {
			window  int64
			spanned bool
		}{{span, true}, {1 << 30, true}, {span - 1, false}} {
			wr := &countReads{r: f}
			got, err := OpenWith(wr, int64(len(b)), OpenOptions{AllowNullStorage: true, Window: c.window})
			require.NoError(t, err, path)
			assert.Equal(t, want, got, "%s window %d", path, c.window)
			if c.spanned {
				assert.Less(t, wr.reads, plain.reads, "%s: the span is one read", path)
				assert.Equal(t, plain.bytes, wr.bytes, "%s: the same bytes", path)
			} else {
				assert.Equal(t, plain.reads, wr.reads, "%s: a window short of the span changes nothing", path)
			}
		}
		// Cut inside the span: the same error as without a window.
		cut := h.Offsets.Offset + 100
		_, werr := OpenWith(&countReads{r: f}, cut, OpenOptions{Window: 1 << 30})
		_, perr := OpenWith(&countReads{r: f}, cut, OpenOptions{})
		require.Error(t, perr)
		assert.Equal(t, perr.Error(), werr.Error(), path)
		f.Close()
	}
	assert.Positive(t, n)
}
