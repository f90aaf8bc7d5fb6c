package recordcache

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

func record(id int32, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(int(id)*7 + i)
	}
	return b
}

func TestRecordCacheClock(t *testing.T) {
	const size = 100
	c, err := New(50, size, 4*50+3*128) // room for 3 records
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, 3, c.Stats().Slots)
	require.Equal(t, 128, c.stride, "16-byte header, 64-byte alignment")
	for id := int32(0); id < 3; id++ {
		c.Put(id, record(id, size))
	}
	// Referencing 0 and 2 leaves 1 as the CLOCK victim.
	for _, id := range []int32{0, 2} {
		rec, tok, ok := c.Get(id)
		require.True(t, ok, "record %d", id)
		require.Equal(t, record(id, size), rec, "record %d", id)
		require.True(t, c.Valid(tok), "record %d", id)
	}
	c.Put(10, record(10, size))
	// CLOCK should have replaced record 1, the one not referenced.
	assert.False(t, c.Contains(1))
	for _, id := range []int32{0, 2, 10} {
		assert.True(t, c.Contains(id), "record %d", id)
	}
	c.Put(10, record(99, size)) // already cached: kept as it was
	dst := make([]byte, size)
	require.True(t, c.Copy(dst, 10))
	require.Equal(t, record(10, size), dst, "record 10 changed by a second Put")
	_, _, ok := c.Get(1)
	require.False(t, ok, "Get of an evicted record succeeded")
	want := Stats{Slots: 3, Used: 3, Bytes: 3*128 + 4*50, Inserts: 4, Evictions: 1, Record: size}
	require.Equal(t, want, c.Stats())
}

func TestRecordCacheBudget(t *testing.T) {
	_, err := New(1000, 3136, 4000)
	require.ErrorIs(t, err, partial.ErrBadOption, "budget below one record")
	c, err := New(10, 64, 1<<30)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, 10, c.Stats().Slots, "slots for 10 ids")
}

// TestRecordCacheConcurrent: readers racing writers never accept bytes of a
// record other than the one they asked for.
func TestRecordCacheConcurrent(t *testing.T) {
	const n, size = 64, 200
	c, err := New(n, size, 4*n+8*(size+16+64))
	require.NoError(t, err)
	defer c.Close()
	var stop atomic.Bool
	var wg, readers sync.WaitGroup
	var accepted, rejected atomic.Int64
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				id := int32((i*13 + w*5) % n)
				c.Put(id, record(id, size))
			}
		}(w)
	}
	for r := 0; r < 3; r++ {
		readers.Add(1)
		go func(r int) {
			defer readers.Done()
			got := make([]byte, size)
			for i := 0; i < 200000; i++ {
				id := int32((i*31 + r) % n)
				rec, tok, ok := c.Get(id)
				if !ok {
					continue
				}
				copy(got, rec)
				if !c.Valid(tok) {
					rejected.Add(1)
					continue
				}
				accepted.Add(1)
				if !bytes.Equal(got, record(id, size)) {
					assert.Fail(t, "accepted bytes of another record", "record %d", id)
					return
				}
			}
		}(r)
	}
	readers.Wait()
	stop.Store(true)
	wg.Wait()
	require.NotZero(t, accepted.Load(), "no read was accepted")
	t.Logf("accepted %d, rejected %d (overwritten while read)", accepted.Load(), rejected.Load())
}
