package blockcache

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// mirrored is a Cached over data in blocks of 4 KiB with a mirror, or skips
// where mirrors do not exist.
func mirrored(t *testing.T, data []byte, budget int64) *Cached {
	t.Helper()
	c, err := newCached("mem", partial.NewMemory("mem", data), nil, budget, 4096, 0, true)
	require.NoError(t, err)
	if c.mirror == nil {
		c.Close()
		t.Skip("no mirror on this platform")
	}
	return c
}

func pattern(n int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i>>12 + 1) // never all zero over a block
	}
	return data
}

// viewBlock0 opens a read section on c, caches block 0 and views it whole.
// exit closes the section; later calls do nothing (defer it before a
// Close, which waits for open sections).
func viewBlock0(t *testing.T, c *Cached) (v []byte, exit func()) {
	t.Helper()
	e := c.EnterRead()
	var once sync.Once
	exit = func() { once.Do(func() { c.ExitRead(e) }) }
	if _, err := c.ReadAtContext(context.Background(), make([]byte, 1), 0, nil); err != nil {
		exit()
		require.NoError(t, err)
	}
	v, ok := c.ViewBlock(0, c.BlockSize(), nil)
	if !ok {
		exit()
		require.Fail(t, "block 0 not cached")
	}
	return v, exit
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); {
		require.False(t, time.Now().After(end), "timed out waiting for %s", what)
		time.Sleep(time.Millisecond)
	}
}

// TestMirrorViewAcrossBlocks: with a mirror, a range across block
// boundaries is one view once every block it spans is cached, byte for
// byte, the file's short tail included.
func TestMirrorViewAcrossBlocks(t *testing.T) {
	const bs = 4096
	data := pattern(5*bs + 100)
	c := mirrored(t, data, 1<<20)
	defer c.Close()
	e := c.EnterRead()
	defer c.ExitRead(e)
	off, n := int64(2*bs-10), int64(bs+20) // blocks 1, 2 and 3
	_, ok := c.ViewBlock(off, n, nil)
	require.False(t, ok, "view of an empty cache")
	for _, at := range []int64{off, off + n - 1} {
		_, err := c.ReadAtContext(context.Background(), make([]byte, 1), at, nil)
		require.NoError(t, err)
	}
	_, ok = c.ViewBlock(off, n, nil)
	require.False(t, ok, "view with the middle block missing")
	_, err := c.ReadAtContext(context.Background(), make([]byte, 1), 2*bs, nil)
	require.NoError(t, err)
	var tl partial.Tally
	v, ok := c.ViewBlock(off, n, &tl)
	require.True(t, ok, "view across three blocks")
	require.Equal(t, data[off:off+n], v, "view across three blocks")
	assert.Equal(t, int64(1), tl.CacheHits, "tally %+v, want one hit", tl)
	_, err = c.ReadAtContext(context.Background(), make([]byte, 150), 5*bs-50, nil)
	require.NoError(t, err)
	v, ok = c.ViewBlock(5*bs-50, 150, nil)
	if assert.True(t, ok, "view into the short tail block") {
		assert.Equal(t, data[5*bs-50:], v, "view into the short tail block differs")
	}
	_, ok = c.ViewBlock(5*bs-50, 151, nil)
	assert.False(t, ok, "view past the end of the file")
}

// TestMirrorDiscardAfterSections: an evicted block stays readable in place
// while a section that could have seen it is open, and its pages go back to
// the system once the section ends.
func TestMirrorDiscardAfterSections(t *testing.T) {
	const bs = 4096
	data := pattern(64 * bs)
	c := mirrored(t, data, 16*bs) // one block per shard
	defer c.Close()
	v, exit := viewBlock0(t, c)
	defer exit()             // before Close, which would wait for the section
	touchBlocks(t, c, 1, 64) // evicts block 0 (and most others)
	_, ok := c.ViewBlock(0, 1, nil)
	require.False(t, ok, "block 0 still cached")
	time.Sleep(20 * reclaimPause)
	require.Equal(t, data[:bs], v, "an evicted block was discarded under an open section")
	require.NotZero(t, c.mirror.pendingBytes.Load(), "no evicted bytes pending while the section is open")
	before := c.Stats().ResidentBytes
	exit()
	waitFor(t, "the evicted blocks' discard", func() bool { return c.mirror.pendingBytes.Load() == 0 })
	assert.Equal(t, make([]byte, bs), c.mirror.mem.B[:bs], "block 0's pages were not given back (still hold its bytes)")
	// The inner Memory backend holds the file; the cache at most its budget.
	after := c.Stats().ResidentBytes
	assert.Less(t, after, before, "resident bytes before and after the discard")
	assert.LessOrEqual(t, after, int64(len(data))+16*bs, "resident bytes after the discard (file %d, budget %d)", len(data), 16*bs)
	// Read again, block 0 comes back whole.
	got := make([]byte, bs)
	_, err := c.ReadAtContext(context.Background(), got, 0, nil)
	assert.NoError(t, err, "block 0 read back after its discard")
	assert.Equal(t, data[:bs], got, "block 0 read back after its discard")
}

// TestMirrorCloseWaitsForSections: Close unmaps only after the open
// sections end, and views taken in them stay readable until then.
func TestMirrorCloseWaitsForSections(t *testing.T) {
	const bs = 4096
	data := pattern(8 * bs)
	c := mirrored(t, data, 1<<20)
	e := c.EnterRead()
	_, err := c.ReadAtContext(context.Background(), make([]byte, 1), 3*bs, nil)
	require.NoError(t, err)
	v, ok := c.ViewBlock(3*bs, bs, nil)
	require.True(t, ok, "block 3 not cached")
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.Fail(t, "Close returned with a section open", "Close: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	assert.Equal(t, data[3*bs:4*bs], v, "a view changed while Close waited")
	_, ok = c.ViewBlock(3*bs, 1, nil)
	assert.False(t, ok, "a closing backend served a new view")
	c.ExitRead(e)
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		require.Fail(t, "Close did not return after the section ended")
	}
}

// TestMirrorConcurrentChurn: readers view and read random ranges while a
// small budget evicts blocks all the time; every byte they see is the
// file's (run with -race).
func TestMirrorConcurrentChurn(t *testing.T) {
	const bs = 4096
	data := pattern(256 * bs)
	churn(t, mirrored(t, data, 32*bs), data)
}

// churn has 4 readers view and read random ranges of c (over data) in
// read sections for 300 ms while c's small budget evicts all the time,
// checking every byte, then closes c.
func churn(t *testing.T, c *Cached, data []byte) {
	t.Helper()
	const bs = 4096
	defer c.Close()
	var wg sync.WaitGroup
	deadline := time.Now().Add(300 * time.Millisecond)
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			buf := make([]byte, 3*bs)
			for time.Now().Before(deadline) {
				e := c.EnterRead()
				var views [][2]int64
				var got [][]byte
				for range 8 {
					off := r.Int64N(int64(len(data)) - 3*bs)
					n := 1 + r.Int64N(3*bs)
					if v, ok := c.ViewBlock(off, n, nil); ok {
						views, got = append(views, [2]int64{off, n}), append(got, v)
						continue
					}
					if _, err := c.ReadAtContext(context.Background(), buf[:n], off, nil); err != nil || !bytes.Equal(buf[:n], data[off:off+n]) {
						errs <- "a read returned other bytes than the file's"
						c.ExitRead(e)
						return
					}
				}
				time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond) // evictions go on meanwhile
				for i, v := range got {
					if off, n := views[i][0], views[i][1]; !bytes.Equal(v, data[off:off+n]) {
						errs <- "a view changed inside its section"
						c.ExitRead(e)
						return
					}
				}
				c.ExitRead(e)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		assert.Fail(t, e)
	}
	assert.NotZero(t, c.cache.Evictions(), "no evictions: the test did not churn")
}

// TestMirrorAligned: with an align offset the mirror puts that offset on a
// 64-byte boundary; views, reads and batches stay byte for byte the file's,
// across the shorter padded first block too.
func TestMirrorAligned(t *testing.T) {
	const bs = 4096
	data := pattern(10*bs + 77)
	for _, align := range []int64{58, 3*bs + 58, 64, 1} {
		c, err := newCached("mem", partial.NewMemory("mem", data), nil, 1<<20, bs, align, true)
		require.NoError(t, err)
		if c.mirror == nil {
			c.Close()
			t.Skip("no mirror on this platform")
		}
		e := c.EnterRead()
		_, err = c.ReadAtContext(context.Background(), make([]byte, len(data)), 0, nil)
		require.NoError(t, err)
		for _, off := range []int64{align, align + 512, align + 64*7} {
			v, ok := c.ViewBlock(off, 512, nil)
			require.True(t, ok, "align %d: view at %d", align, off)
			require.Equal(t, data[off:off+512], v, "align %d: view at %d", align, off)
			assert.Zero(t, uintptr(unsafe.Pointer(&v[0]))%64, "align %d: offset %d's place in memory mod 64", align, off)
		}
		// Every block's bounds: views of one byte on either side of each.
		for blk := int64(0); blk < c.g.count(); blk++ {
			start, end := c.g.span(blk)
			for _, off := range []int64{start, end - 1} {
				v, ok := c.ViewBlock(off, 1, nil)
				require.True(t, ok, "align %d: block %d [%d, %d): byte %d", align, blk, start, end, off)
				require.Equal(t, data[off], v[0], "align %d: block %d [%d, %d): byte %d", align, blk, start, end, off)
			}
		}
		reqs := []partial.ReadReq{{Off: 5, Buf: make([]byte, 2*bs)}, {Off: int64(len(data)) - 100, Buf: make([]byte, 100)}}
		require.NoError(t, c.ReadBatch(context.Background(), reqs))
		for _, q := range reqs {
			assert.Equal(t, data[q.Off:q.Off+int64(len(q.Buf))], q.Buf, "align %d: batch read at %d differs", align, q.Off)
		}
		c.ExitRead(e)
		c.Close()
	}
}

// TestMirrorOnlyWhenTheFileFits: a cache that can hold the file (with an
// eighth to spare) keeps it in a mirror; a smaller one, which would churn,
// keeps heap blocks.
func TestMirrorOnlyWhenTheFileFits(t *testing.T) {
	data := pattern(64 * 4096)
	for _, tc := range []struct {
		budget int64
		want   bool
	}{{MirrorBudget(int64(len(data))), true}, {int64(len(data)), false}, {16 * 4096, false}} {
		c, err := NewCached("mem", partial.NewMemory("mem", data), nil, tc.budget, 4096)
		require.NoError(t, err)
		if got := c.mirror != nil; !(got == false && tc.want && !mirrorsWork()) {
			assert.Equal(t, tc.want, got, "budget %d for a file of %d: mirror", tc.budget, len(data))
		}
		c.Close()
	}
}

// mirrorsWork reports whether this platform can make a mirror at all.
func mirrorsWork() bool {
	m := newMirror(grid{lg: 12, bs: 4096, size: 4096}, false)
	if m == nil {
		return false
	}
	m.release()
	return true
}

// slotted is a Cached over data in blocks of 4 KiB whose blocks live in
// recycled slots (a private cache smaller than the file).
func slotted(t *testing.T, data []byte, budget int64) *Cached {
	t.Helper()
	c, err := NewCached("mem", partial.NewMemory("mem", data), nil, budget, 4096)
	require.NoError(t, err)
	require.NotNil(t, c.slots, "budget %d for a file of %d: no slots", budget, len(data))
	return c
}

// TestSlotsReusedAfterSections: an evicted block's slot is not reused
// while a section that could have seen it is open (its bytes stay put
// while other blocks come and go), and is reused after.
func TestSlotsReusedAfterSections(t *testing.T) {
	const bs = 4096
	data := pattern(256 * bs)
	c := slotted(t, data, 16*bs) // one block per shard
	defer c.Close()
	v, exit := viewBlock0(t, c)
	defer exit()                         // before Close, which would wait for the section
	for round := 0; round < 4; round++ { // evictions go on, slots are in demand
		touchBlocks(t, c, 1, 256)
		time.Sleep(5 * reclaimPause)
	}
	require.Equal(t, data[:bs], v, "an evicted block's slot was reused under an open section")
	held := c.slots.heldBytes()
	exit()
	waitFor(t, "the pending slots' reuse", func() bool { return c.slots.pendingBytes.Load() == 0 })
	touchBlocks(t, c, 1, 256)
	time.Sleep(5 * reclaimPause)
	assert.LessOrEqual(t, c.slots.heldBytes(), held+slotsPerChunk*bs,
		"slots grew from %d bytes with no section open: freed slots were not reused", held)
}

// TestSlotsConcurrentChurn: TestMirrorConcurrentChurn with slots.
func TestSlotsConcurrentChurn(t *testing.T) {
	const bs = 4096
	data := pattern(256 * bs)
	churn(t, slotted(t, data, 32*bs), data)
}

// countingMemory is a Memory that counts the reads made of it.
type countingMemory struct {
	*partial.Memory
	reads atomic.Int64
}

func (m *countingMemory) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	m.reads.Add(1)
	return m.Memory.ReadAtContext(ctx, p, off, t)
}

// TestCachedWarm: Warm caches a range's blocks, byte for byte, in a few
// large inner reads, for every home (mirror, slots, heap), and leaves the
// blocks outside the range alone.
func TestCachedWarm(t *testing.T) {
	const bs = 4096
	data := pattern(600*bs + 100)
	shared := New(2 << 20) // below the file: heap blocks
	for _, tc := range []struct {
		name   string
		cache  *Cache
		budget int64
	}{{"mirror", nil, 4 << 20}, {"slots", nil, 2 << 20}, {"heap", shared, 0}} {
		inner := &countingMemory{Memory: partial.NewMemory("mem", data)}
		c, err := NewCachedAligned("mem", inner, tc.cache, tc.budget, bs, 58)
		require.NoError(t, err)
		got := [3]bool{c.mirror != nil, c.slots != nil, c.sec == nil}
		require.False(t, tc.name == "mirror" && !got[0] || tc.name == "slots" && !got[1] || tc.name == "heap" && !got[2],
			"%s: homes %v", tc.name, got)
		off, n := int64(3*bs+7), int64(200*bs) // 201 blocks, under every budget
		require.NoError(t, c.Warm(context.Background(), off, n))
		assert.LessOrEqual(t, inner.reads.Load(), int64(2), "%s: inner reads of a Warm of %d bytes", tc.name, n)
		e := c.EnterRead()
		for at := off; at < off+n; at += bs / 2 {
			m := min(int64(100), off+n-at)
			dst := make([]byte, m)
			require.True(t, c.CopyCached(dst, at, nil), "%s: bytes at %d not cached", tc.name, at)
			require.Equal(t, data[at:at+m], dst, "%s: bytes at %d not cached as the file's", tc.name, at)
		}
		assert.False(t, c.CopyCached(make([]byte, 10), off+n+2*bs, nil), "%s: a block past the range was cached", tc.name)
		c.ExitRead(e)
		assert.Error(t, c.Warm(context.Background(), int64(len(data))-10, 20), "%s: Warm past the end succeeded", tc.name)
		c.Close()
	}
}

// touchBlocks reads a byte of each block in [from, to), loading each one.
func touchBlocks(t *testing.T, c *Cached, from, to int64) {
	t.Helper()
	for blk := from; blk < to; blk++ {
		_, err := c.ReadAtContext(context.Background(), make([]byte, 1), blk*c.BlockSize(), nil)
		require.NoError(t, err)
	}
}
