package quant

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
)

// integerVectors returns n vectors of dimension d whose dimension j takes
// integers in a range of its own (at most 256 values: 0..255 like pixels,
// a narrower one, negative ones, a constant) or, with frac, one
// non-integer component somewhere.
func integerVectors(n, d int, frac bool) []float32 {
	rng := rand.New(rand.NewPCG(18, 4))
	x := make([]float32, n*d)
	for i := range n {
		for j := range d {
			switch j % 4 {
			case 0:
				x[i*d+j] = float32(rng.IntN(256))
			case 1:
				x[i*d+j] = float32(rng.IntN(40) + 7)
			case 2:
				x[i*d+j] = float32(rng.IntN(200) - 150)
			default:
				x[i*d+j] = 3
			}
		}
	}
	if frac {
		x[(n/2)*d+1] += 0.5
	}
	return x
}

func buildFrom(t *testing.T, x []float32, n, d int, lvl Level) *Codes {
	t.Helper()
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
	c, err := Build(bytes.NewReader(raw), 0, n, d, faissfmt.MetricL2, lvl, BuildOptions{SampleBytes: 1 << 30})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestExact: 4x codes of integer data (at most 256 values per dimension)
// are exact: Decode gives every vector back bit for bit, also after a
// guide round trip. One fractional component, a value the training
// sample did not see (clamped), another level, or float data make them
// inexact.
func TestExact(t *testing.T) {
	const n, d = 3000, 37 // d not a multiple of 8: the kernels' tails
	x := integerVectors(n, d, false)
	c := buildFrom(t, x, n, d, Level4x)
	require.True(t, c.Exact())
	got := make([]float32, d)
	for i := range n {
		c.Decode(int32(i), got)
		require.Equal(t, x[i*d:(i+1)*d], got, "vector %d", i)
	}

	path := filepath.Join(t.TempDir(), "g")
	src := SourceID{Size: 1, ModTime: 2}
	require.NoError(t, Write(path, c, src))
	info, err := ReadInfo(path)
	require.NoError(t, err)
	assert.True(t, info.Exact)
	assert.Equal(t, 4, info.Version, "the flag came with version 4")
	l, err := Load(path, src)
	require.NoError(t, err)
	defer l.Close()
	require.True(t, l.Exact())
	for i := 0; i < n; i += 97 {
		l.Decode(int32(i), got)
		require.Equal(t, x[i*d:(i+1)*d], got, "loaded vector %d", i)
	}

	assert.False(t, buildFrom(t, integerVectors(n, d, true), n, d, Level4x).Exact(), "a fractional component")
	assert.False(t, buildFrom(t, x, n, d, Level8x).Exact(), "8x")
	unseen := integerVectors(n, d, false)
	unseen[(n-1)*d+2] = 200 // beyond what the sample saw: clamped
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(unseen))), 4*len(unseen))
	cu, err := Build(bytes.NewReader(raw), 0, n, d, faissfmt.MetricL2, Level4x, BuildOptions{SampleBytes: int64(4 * d * 100)})
	require.NoError(t, err)
	defer cu.Close()
	assert.False(t, cu.Exact(), "a value outside the trained range")
	ds := fixture(t, "hnsw_flat_l2")
	assert.False(t, ds.build(t, Level4x).Exact(), "float data")
}

// TestExactFlagChecked: a guide whose flags byte claims exact on a level
// other than 4x, holds unknown bits, or sits in a version before 4 is
// corrupt, even with its checksums recomputed.
func TestExactFlagChecked(t *testing.T) {
	const n, d = 500, 16
	src := SourceID{Size: 1}
	for _, tc := range []struct {
		name    string
		lvl     Level
		flags   uint8
		version uint32
	}{
		{"exact 8x", Level8x, flagExact, 4},
		{"unknown bit", Level4x, 2, 4},
		{"exact in version 1", Level4x, flagExact, 1},
	} {
		c := buildFrom(t, integerVectors(n, d, false), n, d, tc.lvl)
		var buf bytes.Buffer
		_, err := c.Encode(&buf, src)
		require.NoError(t, err)
		b := buf.Bytes()
		b[15] = tc.flags
		binary.LittleEndian.PutUint32(b[8:], tc.version)
		binary.LittleEndian.PutUint32(b[96:], crc32c(b[:96]))
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32c(b[:len(b)-4]))
		path := filepath.Join(t.TempDir(), "g")
		require.NoError(t, os.WriteFile(path, b, 0o644))
		_, err = Load(path, src)
		require.ErrorIs(t, err, ErrCorrupt, tc.name)
	}
}

// TestDecodeIsTheKernelsValue: on inexact codes Decode is the value the 4x
// distance kernel stands a code for (within rounding).
func TestDecodeIsTheKernelsValue(t *testing.T) {
	ds := fixture(t, "hnsw_flat_l2")
	c := ds.build(t, Level4x)
	got := make([]float32, ds.d)
	var worst float64
	for i := range ds.n {
		c.Decode(int32(i), got)
		for j, v := range got {
			worst = max(worst, math.Abs(float64(v-ds.vec(i)[j]))/math.Max(float64(c.delta[j]), 1e-30))
		}
	}
	assert.LessOrEqual(t, worst, 0.5001, "within half a step of the vector")
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
