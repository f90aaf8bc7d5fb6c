package rerank

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPackedVecFile: a .vec file written packed (records of d·4 bytes, no
// padding) is read by every strategy as the aligned one is, bit for bit,
// and is the header and the data, nothing more.
func TestPackedVecFile(t *testing.T) {
	_, want := flatVectors(t, filepath.Join(fixtures, "hnsw_flat_large.faiss")) // 3000 × 64
	dir := t.TempDir()
	paths := map[string]string{}
	for _, layout := range []string{LayoutAligned, LayoutPacked} {
		p := filepath.Join(dir, layout+".vec")
		f, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, WriteVecLayout(f, 64, 3000, layout, func(i int64, dst []float32) error { copy(dst, want[i]); return nil }, nil))
		require.NoError(t, f.Close())
		paths[layout] = p
	}
	fi, err := os.Stat(paths[LayoutPacked])
	require.NoError(t, err)
	assert.Equal(t, int64(VecAlign+3000*64*4), fi.Size(), "packed: the header and the vectors")
	fi, err = os.Stat(paths[LayoutAligned])
	require.NoError(t, err)
	assert.Equal(t, int64(VecAlign+3000*VecAlign), fi.Size(), "aligned: a 4 KiB record per vector")

	labels := []int32{2999, 0, 17, 18, 19, 63, 64, 1500, 0, 2998} // 63 and 64 straddle a 4 KiB block packed
	for _, strat := range Strategies {
		s, err := Open(paths[LayoutPacked], strat)
		require.NoError(t, err, strat)
		assert.Equal(t, "vec", s.Kind)
		assert.Equal(t, int64(256), s.Stride)
		assert.False(t, s.Aligned())
		require.NoError(t, s.Check(64, 3000))
		got := make([]float32, len(labels)*64)
		require.NoError(t, s.Fetch(labels, got, nil), strat)
		for i, lb := range labels {
			for j := range 64 {
				require.Equal(t, math.Float32bits(want[lb][j]), math.Float32bits(got[i*64+j]), "%s: label %d component %d", strat, lb, j)
			}
		}
		s.Close()
	}

	// A stride neither packed nor aligned is refused, naming the file.
	b, err := os.ReadFile(paths[LayoutPacked])
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(b[32:], 260)
	binary.LittleEndian.PutUint32(b[48:], crc32.ChecksumIEEE(b[:48]))
	bad := filepath.Join(dir, "odd.vec")
	require.NoError(t, os.WriteFile(bad, b, 0o644))
	_, err = Open(bad, "pread")
	assert.ErrorContains(t, err, "odd.vec: stride 260 / offset 4096 fit dimension 64 neither packed")

	assert.Equal(t, LayoutPacked, AutoVecLayout(20))
	assert.Equal(t, LayoutPacked, AutoVecLayout(511))
	assert.Equal(t, LayoutAligned, AutoVecLayout(512))
	assert.Equal(t, LayoutAligned, AutoVecLayout(1024))
	assert.Equal(t, LayoutAligned, AutoVecLayout(1025), "8 KiB records for 4100 bytes: under double")
	assert.Equal(t, LayoutAligned, AutoVecLayout(2000))
}
