package partial

import (
	"bytes"
	"context"
	"errors"
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

// TestDirectBatchContextEnds: a batch whose context ends while it runs
// submits no more reads, on its own ring and on the shared one, aligned
// and bounced: every request is handed over once, the ones read with the
// file's bytes, the others failing with the context's cause; the rings
// serve the next batch.
func TestDirectBatchContextEnds(t *testing.T) {
	want := make([]byte, 1<<20+100)
	for i := range want {
		want[i] = byte(i*13 + i>>12)
	}
	path := filepath.Join(t.TempDir(), "f.bin")
	require.NoError(t, os.WriteFile(path, want, 0o600))
	for _, depth := range []int{2, 16} {
		d, err := OpenDirect(path, depth)
		require.NoError(t, err)
		if d.ring == nil {
			d.Close()
			t.Skip("no io_uring here")
		}
		batch := func(ring string, shift int64, cancelAt int) {
			var reqs []ReadReq
			for i := range 300 {
				reqs = append(reqs, ReadReq{Off: int64((i*37)%256*4096) + shift, Buf: d.AlignedBuffer(4096)})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := make([]int, len(reqs))
			var read, gaveUp int
			err := d.ReadBatchEach(ctx, reqs, func(i int) {
				calls[i]++
				if read+gaveUp == cancelAt {
					cancel()
				}
				switch q := reqs[i]; {
				case q.Err == nil:
					read++
					require.True(t, bytes.Equal(q.Buf, want[q.Off:q.Off+4096]), "depth %d, %s: bytes at %d", depth, ring, q.Off)
				case errors.Is(q.Err, context.Canceled):
					gaveUp++
				default:
					t.Fatalf("depth %d, %s: request %d: %v", depth, ring, i, q.Err)
				}
			})
			require.ErrorIs(t, err, context.Canceled, "depth %d, %s", depth, ring)
			for i, n := range calls {
				require.Equal(t, 1, n, "depth %d, %s: request %d handed over %d times", depth, ring, i, n)
			}
			require.Greater(t, read, 0, "depth %d, %s", depth, ring)
			require.Greater(t, gaveUp, 0, "depth %d, %s: nothing given up", depth, ring)
			next := make([]ReadReq, 20)
			for i := range next {
				next[i] = ReadReq{Off: reqs[i].Off, Buf: reqs[i].Buf}
			}
			require.NoError(t, d.ReadBatch(context.Background(), next), "depth %d, %s: the next batch", depth, ring)
		}
		for _, shift := range []int64{0, 7} {
			batch("owned ring", shift, 0)
			batch("owned ring", shift, 5)
			var taken []ownedRing
			for range ownedRings {
				taken = append(taken, <-d.owned)
			}
			batch("shared ring", shift, 0)
			batch("shared ring", shift, 5)
			for _, o := range taken {
				d.owned <- o
			}
		}
		require.Len(t, d.owned, ownedRings, "the owned rings are given back")
		require.NoError(t, d.Close())
	}
}
