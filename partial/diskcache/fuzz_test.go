package diskcache

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzBlockFile: any bytes as a block file either fail the checks a read
// makes, or hold a block whose header encodes back to them; nothing
// panics, and a check of part of the block agrees with the whole.
func FuzzBlockFile(f *testing.F) {
	m := meta{Format: 1, Name: "s3://b/k", ETag: "e", Size: 100000, BlockSize: 65536}
	v := versionOf(m)
	for _, n := range []int{1, 22, chunkSize, chunkSize + 1, 3*chunkSize + 7} {
		data := bytes.Repeat([]byte{byte(n)}, n)
		f.Add(append(encodeHeader(v, 8192, data), data...), uint16(0))
	}
	f.Add([]byte(magic), uint16(1))
	f.Add([]byte{}, uint16(2))
	f.Fuzz(func(t *testing.T, b []byte, part uint16) {
		h, err := decodeHeader(b)
		if err != nil {
			return
		}
		n := int64(h.n)
		hs := headerSize(n)
		if int64(len(b)) < hs+n {
			return // a short file: the read of its data fails
		}
		data := b[hs : hs+n]
		whole := h.check(v, h.off, n, 0, data)
		if whole == nil {
			require.Equal(t, encodeHeader(v, h.off, data), b[:hs], "a sound block's header is its encoding")
		}
		// The chunks from one on: sound whenever the whole block is.
		first := int64(part) % chunks(n)
		if err := h.check(v, h.off, n, first, data[first*chunkSize:]); whole == nil {
			require.NoError(t, err)
		}
	})
}

// FuzzMeta: a meta file that parses is valid and survives a round trip.
func FuzzMeta(f *testing.F) {
	f.Add(encodeMeta(meta{Format: 1, Name: "s3://b/k", ETag: `"abc"`, Size: 1 << 30, BlockSize: 65536}))
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{"format":1,"name":"n","etag":"e","size":-1,"block_size":4096}`))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMeta(b)
		if err != nil {
			return
		}
		require.NoError(t, checkBlockSize(m.BlockSize))
		require.GreaterOrEqual(t, m.Size, int64(0))
		back, err := parseMeta(encodeMeta(m))
		require.NoError(t, err)
		require.Equal(t, m, back)
	})
}

// FuzzNames: block file names and object directory names parse only in
// their one canonical form.
func FuzzNames(f *testing.F) {
	f.Add("1f.blk")
	f.Add("01f.blk")
	f.Add("0.blk.tmp3")
	f.Add(objectDirName("s3://b/k"))
	f.Fuzz(func(t *testing.T, s string) {
		if blk, ok := parseBlockName(s); ok {
			require.GreaterOrEqual(t, blk, int64(0))
			require.Equal(t, s, blockName(blk))
		}
		if isObjectDirName(s) {
			require.Len(t, s, 32)
			require.Equal(t, bytes.ToLower([]byte(s)), []byte(s))
		}
	})
}
