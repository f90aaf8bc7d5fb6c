package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// TestLoadOpensFileOnce: a load looks its index file up once. The count
// goes through openHandle, which removes the path as soon as the file is
// open: any later lookup by name (a stat, a second open by a backend, the
// sample of lists, the rerank of the file's own vectors, the guide's
// identity) would fail the load. Every backend, mode full, a rerank from
// the file's own vectors, on_disk with and without a budget (auto: its
// lists are sampled), and a zstd file load, answer a query and count one
// lookup; a plan planned again for what its caller holds (Replan) is
// planned on the same open file.
func TestLoadOpensFileOnce(t *testing.T) {
	copyOf := func(t *testing.T, src string) string {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), filepath.Base(src))
		require.NoError(t, os.WriteFile(path, b, 0o644))
		return path
	}
	fixture := filepath.Join("..", "testdata", "fixtures", "hnsw_flat_l2.faiss")
	ondisk := filepath.Join("..", "testdata", "ondisk", "clustered_l2.faiss")
	zstdOf := func(t *testing.T) string {
		if !zstd.Supported {
			t.Skip("zstd needs cgo")
		}
		src, err := os.Open(fixture)
		require.NoError(t, err)
		defer src.Close()
		path := filepath.Join(t.TempDir(), "x.faiss.zst")
		dst, err := os.Create(path)
		require.NoError(t, err)
		_, err = zstd.CompressSeekable(dst, src, 4096, 1, nil)
		require.NoError(t, err)
		require.NoError(t, dst.Close())
		return path
	}
	for _, c := range []struct {
		name string
		path func(t *testing.T) string
		spec Spec
	}{
		{"mmap", nil, Spec{}},
		{"pread", nil, Spec{Backend: "pread"}},
		{"direct", nil, Spec{Backend: "direct"}},
		{"budget", nil, Spec{MemoryBudget: 8 << 20}},
		{"full", nil, Spec{Mode: "full"}},
		{"rerank own vectors", nil, Spec{Rerank: &RerankSpec{Path: "="}}},
		{"zstd", zstdOf, Spec{}},
		{"on_disk", nil, Spec{Mode: ModeOnDisk, Compression: "4x"}},
		{"on_disk budget auto", nil, Spec{Mode: ModeOnDisk, MemoryBudget: 64 << 20}},
		{"on_disk replanned", nil, Spec{Mode: ModeOnDisk, Compression: "4x", MachineBudget: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var path string
			switch {
			case c.path != nil:
				path = c.path(t)
			case c.spec.Mode == ModeOnDisk:
				path = copyOf(t, ondisk)
			default:
				path = copyOf(t, fixture)
			}
			spec := c.spec
			spec.Path = path
			if spec.Rerank != nil {
				spec.Rerank = &RerankSpec{Path: path}
			}
			opens := 0
			defer func(f func(string, ...partial.OpenOption) (*partial.Handle, error)) { openHandle = f }(openHandle)
			openHandle = func(p string, opts ...partial.OpenOption) (*partial.Handle, error) {
				opens++
				h, err := partial.OpenHandle(p, opts...)
				if err == nil {
					require.NoError(t, os.Remove(p)) // from here on the path names nothing
				}
				return h, err
			}
			if spec.MachineBudget {
				defer func(f func() int64) { machineMemory = f }(machineMemory)
				machineMemory = func() int64 { return 512 << 20 }
			}
			p, err := Prepare(spec)
			require.NoError(t, err)
			if spec.MachineBudget {
				// What the caller now holds leaves the index a budget of
				// the machine's room: planned anew, on the same open file
				// (this small index needs more than such a budget).
				require.Zero(t, p.Spec().MemoryBudget)
				_, err := p.Replan(machineRoom(512<<20) - 100<<10)
				require.ErrorIs(t, err, ErrBudget)
				assert.Equal(t, 1, opens, "lookups of the index's path")
				return
			}
			x, err := p.Open()
			require.NoError(t, err)
			defer x.Close()
			qp, err := x.Plan(Request{K: 5})
			require.NoError(t, err)
			hits, _, err := x.Query(&qp, make([]float64, x.Dim()), nil)
			require.NoError(t, err)
			assert.Len(t, hits, 5)
			assert.Equal(t, 1, opens, "lookups of the index's path")
		})
	}
}
