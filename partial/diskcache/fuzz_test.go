package diskcache

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzBlockFile: any bytes as a block file either fail the checks a read
// makes or are exactly a block that encodes back to them; nothing panics.
func FuzzBlockFile(f *testing.F) {
	m := meta{Format: 1, Name: "s3://b/k", ETag: "e", Size: 10000, BlockSize: 4096}
	v := versionOf(m)
	data := []byte("the bytes of one block")
	good := header{v: v, off: 8192, n: uint32(len(data)), crc: checksum(data)}.encode()
	f.Add(append(good[:], data...))
	f.Add(good[:])
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			return
		}
		enc := h.encode()
		require.Equal(t, enc[:], b[:headerLen], "a header that decodes encodes back to itself")
		rest := b[headerLen:]
		if int(h.n) > len(rest) {
			return // a short file: the read of its data fails
		}
		if err := h.check(v, h.off, rest[:h.n]); err == nil {
			require.Equal(t, v, h.v)
			require.Equal(t, h.crc, checksum(rest[:h.n]))
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
