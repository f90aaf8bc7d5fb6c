package partial

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadToEOF: a request of whole aligned blocks covering the file's
// short last block, marked ToEOF, reads the bytes that exist without an
// error, through io_uring in place and bounced, through Direct's pread fallback and through File;
// unmarked, it fails as before.
func TestReadToEOF(t *testing.T) {
	const size = 3*4096 + 100
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	path := filepath.Join(t.TempDir(), "f.bin")
	require.NoError(t, os.WriteFile(path, want, 0o600))
	d, err := OpenDirect(path, 8)
	require.NoError(t, err)
	defer d.Close()
	f, err := OpenFile(path)
	require.NoError(t, err)
	defer f.Close()
	ring := d.ring
	batch := func(name string, br BatchReader, shift int64) {
		for _, toEOF := range []bool{true, false} {
			buf := d.AlignedBuffer(2 * 4096)
			reqs := []ReadReq{
				{Off: 0, Buf: d.AlignedBuffer(4096)}, // a whole block beside it
				{Off: 2*4096 + shift, Buf: buf[:2*4096-shift], ToEOF: toEOF},
			}
			err := br.ReadBatch(context.Background(), reqs)
			if !toEOF {
				require.ErrorIs(t, err, io.ErrUnexpectedEOF, "%s shift %d unmarked", name, shift)
				continue
			}
			require.NoError(t, err, "%s shift %d", name, shift)
			require.True(t, bytes.Equal(want[:4096], reqs[0].Buf), "%s shift %d: the whole block", name, shift)
			n := size - reqs[1].Off
			require.True(t, bytes.Equal(want[reqs[1].Off:], reqs[1].Buf[:n]), "%s shift %d: the bytes up to the end", name, shift)
		}
	}
	if ring != nil {
		batch("io_uring", d, 0)
		batch("io_uring bounced", d, 5)
	}
	d.ring = nil // the fallback where io_uring is unavailable
	batch("pread fallback", d, 0)
	batch("pread fallback bounced", d, 5)
	d.ring = ring
	batch("File", f, 0)

	// A short read of whole blocks before the end is finished up to the
	// end, not past it, in place and bounced.
	q := ReadReq{Off: 4096, Buf: d.AlignedBuffer(3 * 4096), ToEOF: true}
	copy(q.Buf, want[4096:2*4096]) // what the kernel's short read brought
	d.finishInPlace(context.Background(), &q, 4096)
	require.NoError(t, q.Err)
	require.True(t, bytes.Equal(want[4096:], q.Buf[:size-4096]), "in place")
	q = ReadReq{Off: 4096 + 5, Buf: make([]byte, 3*4096-5), ToEOF: true}
	d.finishBounced(context.Background(), &q, want[4096:2*4096], 4096, 4096)
	require.NoError(t, q.Err)
	require.True(t, bytes.Equal(want[4096+5:], q.Buf[:size-4096-5]), "bounced")
}
