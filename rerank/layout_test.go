package rerank

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// fvecsRecords is n records of dimension d, record i's header saying
// dims[i] when given.
func fvecsRecords(n, d int, dims map[int]int32) []byte {
	var b []byte
	for i := range n {
		h := int32(d)
		if v, ok := dims[i]; ok {
			h = v
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(h))
		b = append(b, make([]byte, 4*d)...)
	}
	return b
}

// npyFile is a version 1.0 .npy file with header h.
func npyFile(h string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint16([]byte("\x93NUMPY\x01\x00"), uint16(len(h)))
	return append(append(b, h...), data...)
}

// TestVectorFileRecords: an .fvecs file whose records disagree (record
// 5, the last), is truncated, or has a dimension that cannot be, and an
// .npy file whose header is not a C-order float32 array of exactly its
// size, are refused by OpenLayoutAs and by every strategy of Open, naming
// the file as given and the record; a whole file is read.
func TestVectorFileRecords(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 2000*32*4)
	good := fvecsRecords(2000, 32, nil)
	for _, c := range []struct {
		name string
		b    []byte
		msg  string
	}{
		{"record5.fvecs", fvecsRecords(2000, 32, map[int]int32{5: 31, 1999: 33}), "record 5 says d=31, the first says d=32"},
		{"last.fvecs", fvecsRecords(2000, 32, map[int]int32{1999: 33}), "record 1999 says d=33, the first says d=32"},
		{"truncated.fvecs", good[:len(good)-1], "record 1999 is cut short: 131 of its 132 bytes (truncated?)"},
		{"zero.fvecs", fvecsRecords(2, 32, map[int]int32{0: 0}), "record 0 says d=0; a dimension is at least 1"},
		{"huge.fvecs", fvecsRecords(2, 32, map[int]int32{0: -1 << 31}), "record 0 says d=-2147483648"},
		{"empty.fvecs", nil, "an empty .fvecs file"},
		{"f8.npy", npyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (1000, 32), }\n", data), "dtype <f8 is not supported"},
		{"i4.npy", npyFile("{'descr': '<i4', 'fortran_order': False, 'shape': (2000, 32), }\n", data), "the array is int32 (<i4), of shape [2000 32]; vectors are a float32 (<f4) array"},
		{"fortran.npy", npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2000, 32), }\n", data), "Fortran-order (column-major) arrays are not supported"},
		{"size.npy", npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1999, 32), }\n", data), "shape (1999, 32) needs"},
		{"hlen.npy", npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2000, 32), }\n", data)[:70], "runs past the end of the file"},
	} {
		p := filepath.Join(dir, c.name)
		require.NoError(t, os.WriteFile(p, c.b, 0o644))
		_, err := OpenLayoutAs(p, "given/"+c.name)
		require.ErrorIs(t, err, ErrVectors, c.name)
		assert.True(t, strings.HasPrefix(err.Error(), "given/"+c.name+": "), "%s: %v", c.name, err)
		assert.ErrorContains(t, err, c.msg, c.name)
		assert.NotContains(t, err.Error(), "rerank", c.name)
		if c.name == "record5.fvecs" {
			assert.ErrorIs(t, err, vecio.ErrFormat)
		}
		for _, strategy := range Strategies {
			_, err := Open(p, strategy)
			assert.ErrorIs(t, err, ErrVectors, "%s %s", c.name, strategy)
			assert.ErrorContains(t, err, c.msg, "%s %s", c.name, strategy)
			assert.True(t, strings.HasPrefix(err.Error(), p+": "), "%s %s: %v", c.name, strategy, err)
		}
	}
	p := filepath.Join(dir, "good.fvecs")
	require.NoError(t, os.WriteFile(p, good, 0o644))
	l, err := OpenLayoutAs(p, "given.fvecs")
	require.NoError(t, err)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.True(t, l.Unchanged(fi))
	l.fi = nil
	assert.Equal(t, Layout{Path: p, Kind: "fvecs", Dim: 32, Count: 2000, Base: 4, Stride: 132}, l)
}

// TestOpenChangedAfterLayout: a vector file written over or replaced
// between the layout's check of its records and the strategy's open is
// refused (ErrFileChanged, naming it), on every local strategy.
func TestOpenChangedAfterLayout(t *testing.T) {
	good := fvecsRecords(100, 8, nil)
	bad := fvecsRecords(100, 8, map[int]int32{5: 7})
	for _, how := range []string{"written", "renamed"} {
		for _, strategy := range Strategies {
			dir := t.TempDir()
			p := filepath.Join(dir, "v.fvecs")
			require.NoError(t, os.WriteFile(p, good, 0o644))
			testAfterLayout = func(path string) {
				if how == "written" {
					require.NoError(t, os.WriteFile(path, bad, 0o644))
					require.NoError(t, os.Chtimes(path, time.Now().Add(time.Hour), time.Now().Add(time.Hour)))
					return
				}
				tmp := filepath.Join(dir, "new.fvecs")
				require.NoError(t, os.WriteFile(tmp, bad, 0o644))
				require.NoError(t, os.Rename(tmp, path))
			}
			s, err := OpenAs(p, "given.fvecs", strategy)
			testAfterLayout = nil
			if s != nil {
				s.Close()
			}
			require.ErrorIs(t, err, partial.ErrFileChanged, "%s %s", how, strategy)
			assert.EqualError(t, err, "given.fvecs changed while it was being opened; open it again", "%s %s", how, strategy)
		}
	}
}
