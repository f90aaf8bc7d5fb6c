package partial

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirectBatchRings: a batch reads the file's bytes on a ring of its own
// and, when every owned ring is taken, on the shared reaped ring; at a
// depth below the batch (completions reaped while more wait to be queued)
// and above the ring's size.
func TestDirectBatchRings(t *testing.T) {
	want := make([]byte, 1<<20+100) // a pattern that differs from one block to the next
	for i := range want {
		want[i] = byte(i*13 + i>>12)
	}
	path := filepath.Join(t.TempDir(), "f.bin")
	require.NoError(t, os.WriteFile(path, want, 0o600))
	for _, depth := range []int{3, 64, 1024} {
		d, err := OpenDirect(path, depth)
		require.NoError(t, err)
		if d.ring == nil {
			d.Close()
			t.Skip("no io_uring here")
		}
		require.Len(t, d.owned, ownedRings, "every owned ring set up")
		batch := func(path string) {
			var reqs []ReadReq
			for i := range 300 {
				reqs = append(reqs, ReadReq{Off: int64((i*37)%256*4096) + int64(i%2)*5, Buf: make([]byte, 4096)})
			}
			require.NoError(t, d.ReadBatch(context.Background(), reqs), "depth %d, %s", depth, path)
			for _, q := range reqs {
				require.True(t, bytes.Equal(q.Buf, want[q.Off:q.Off+4096]), "depth %d, %s: bytes at %d", depth, path, q.Off)
			}
		}
		batch("owned ring")
		require.Len(t, d.owned, ownedRings, "the owned ring is given back")
		var taken []ownedRing
		for range ownedRings {
			taken = append(taken, <-d.owned)
		}
		batch("shared ring")
		for _, o := range taken {
			d.owned <- o
		}
		require.NoError(t, d.Close())
	}
}
