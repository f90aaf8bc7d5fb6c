package zstd

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSeekTable: no input makes the seek-table parser panic, and an accepted
// table describes frames that tile the file before the table.
func FuzzSeekTable(f *testing.F) {
	var buf bytes.Buffer
	if zstdAvailable {
		CompressSeekable(&buf, bytes.NewReader(bytes.Repeat([]byte("abc"), 5000)), 4096, 1, nil)
		f.Add(buf.Bytes())
	}
	f.Add([]byte{0x5e, 0x2a, 0x4d, 0x18, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0xb1, 0xea, 0x92, 0x8f})
	f.Fuzz(func(t *testing.T, b []byte) {
		frames, size, err := seekTable(bytes.NewReader(b), int64(len(b)), "fuzz")
		if err != nil {
			return
		}
		var d int64
		for _, fr := range frames {
			require.False(t, fr.cOff < 0 || fr.cSize < 0 || fr.cOff+fr.cSize > int64(len(b)) || fr.dOff != d || fr.dSize <= 0,
				"bad frame %+v in a %d-byte file", fr, len(b))
			d += fr.dSize
		}
		require.Equal(t, size, d, "bytes the frames hold")
	})
}
