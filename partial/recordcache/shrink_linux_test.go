package recordcache

import (
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/faiss-sidecar/faiss-sidecar/internal/longtests"
)

// TestSetBudgetShrinks: a cache shrunk keeps the records of the slots it
// keeps, drops the others (a reader's bytes of one fail Valid), counts only
// what it keeps, gives the pages of the slots dropped back to the system,
// and goes on storing records within its new size.
func TestSetBudgetShrinks(t *testing.T) {
	const n, size = 4000, 3136
	c, err := New(n, size, 4*n+2000*3200)
	require.NoError(t, err)
	defer c.Close()
	slots := c.Stats().Slots
	require.Equal(t, 2000, slots)
	for id := int32(0); id < int32(slots); id++ {
		c.Put(id, record(id, size))
	}
	_, lostTok, ok := c.Get(int32(slots - 1)) // held across the shrink
	require.True(t, ok)
	page := os.Getpagesize()
	resident := func(lo, hi int) int {
		vec := make([]byte, (hi-lo+page-1)/page)
		b := c.buf.B[lo:hi]
		_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
		require.Zero(t, e, "mincore")
		r := 0
		for _, v := range vec {
			r += int(v & 1)
		}
		return r
	}
	tail := func() (int, int) { return (500*c.stride + page - 1) / page * page, slots * c.stride / page * page }
	lo, hi := tail()
	require.Positive(t, resident(lo, hi), "the records are in memory before")

	c.SetBudget(4*n + 500*int64(c.stride))
	if c.buf.Mapped() { // before anything reads a dropped slot's header (a read maps the zero page)
		assert.Zero(t, resident(lo, hi), "the dropped slots' pages are given back")
	}
	st := c.Stats()
	assert.Equal(t, 500, st.Slots)
	assert.Equal(t, 500, st.Used)
	assert.Equal(t, int64(4*n+500*c.stride), st.Bytes)
	assert.Equal(t, st.Bytes, c.Budget())
	assert.False(t, c.Valid(lostTok), "bytes of a dropped record are not valid")
	for id := int32(0); id < int32(slots); id++ {
		rec, tok, ok := c.Get(id)
		if id < 500 {
			require.True(t, ok, "record %d is kept", id)
			require.Equal(t, record(id, size), rec)
			require.True(t, c.Valid(tok))
		} else {
			require.False(t, ok, "record %d is dropped", id)
			require.False(t, c.Contains(id))
		}
	}
	for id := int32(slots); id < int32(slots)+700; id++ { // stores go on, within 500 slots
		c.Put(id, record(id, size))
	}
	st = c.Stats()
	assert.Equal(t, 500, st.Slots)
	assert.Equal(t, 500, st.Used)
	rec, _, ok := c.Get(int32(slots) + 699)
	require.True(t, ok, "the last record stored is cached")
	assert.Equal(t, record(int32(slots)+699, size), rec)

	c.SetBudget(0) // one slot at least
	assert.Equal(t, 1, c.Stats().Slots)
}

// TestSetBudgetWhileUsed: readers and writers running while the cache
// shrinks in steps never take another record's bytes for a valid one.
func TestSetBudgetWhileUsed(t *testing.T) {
	const n, size = 2000, 512
	c, err := New(n, size, 4*n+1000*600)
	require.NoError(t, err)
	defer c.Close()
	stop := make(chan struct{})
	done := make(chan int, 4)
	for w := range 4 {
		go func() {
			bad := 0
			for i := 0; ; i++ {
				select {
				case <-stop:
					done <- bad
					return
				default:
				}
				id := int32((i*7919 + w*104729) % n)
				if rec, tok, ok := c.Get(id); ok {
					want := record(id, size)
					same := string(rec) == string(want)
					if c.Valid(tok) && !same {
						bad++
					}
				} else {
					c.Put(id, record(id, size))
				}
			}
		}()
	}
	for round := range 2 { // shrinking, then growing back
		for b := int64(4*n + 1000*600); b > 4*n+600; b -= 50 * 600 {
			if round == 1 {
				b = 4*n + 1000*600 + 4*n + 600 - b
			}
			c.SetBudget(b)
			time.Sleep(2 * time.Millisecond)
		}
	}
	close(stop)
	for range 4 {
		assert.Zero(t, <-done, "valid bytes of another record")
	}
}

// TestSetBudgetAfterClose: shrinking a closed cache (an index closing while
// a server makes room) does nothing.
func TestSetBudgetAfterClose(t *testing.T) {
	c, err := New(100, 64, 4*100+50*128)
	require.NoError(t, err)
	for id := int32(0); id < 50; id++ {
		c.Put(id, record(id, 64))
	}
	require.NoError(t, c.Close())
	assert.NotPanics(t, func() { c.SetBudget(4*100 + 10*128) })
}

// TestSetBudgetGrows: a shrunk cache grows back to the slots it was made
// with, no further, and stores fill them again. A token taken before a
// slot was given back stays invalid after the slot is refilled, though
// the slot's header came back from the system as zeros (a record's first
// version is 2 either way).
func TestSetBudgetGrows(t *testing.T) {
	const n, size = 4000, 3136
	c, err := New(n, size, 4*n+2000*3200)
	require.NoError(t, err)
	defer c.Close()
	made := c.Budget()
	for id := int32(0); id < 2000; id++ {
		c.Put(id, record(id, size))
	}
	_, oldTok, ok := c.Get(1999)
	require.True(t, ok)
	c.SetBudget(4*n + 500*int64(c.stride))
	require.Equal(t, 500, c.Stats().Slots)
	c.SetBudget(1 << 40)
	st := c.Stats()
	assert.Equal(t, 2000, st.Slots, "back to the slots it was made with, no more")
	assert.Equal(t, made, c.Budget())
	assert.Equal(t, 500, st.Used)
	for id := int32(2000); id < 3500; id++ { // into slots 500…1999
		c.Put(id, record(id, size))
	}
	assert.Equal(t, 2000, c.Stats().Used)
	assert.Zero(t, c.Stats().Evictions, "the grown slots took them without evicting")
	assert.False(t, c.Valid(oldTok), "slot 1999 holds another record now")
	for _, id := range []int32{0, 499, 2000, 3499} {
		rec, tok, ok := c.Get(id)
		require.True(t, ok, "record %d", id)
		assert.Equal(t, record(id, size), rec)
		assert.True(t, c.Valid(tok))
	}
	_, _, ok = c.Get(1999)
	assert.False(t, ok, "dropped by the shrink")
}

// TestPopulateAhead: once the first fill enters another MiB, the pages of
// the two MiB after it are backed before any store reaches them, and the
// pages further on are not.
func TestPopulateAhead(t *testing.T) {
	const n, size = 4000, 3136
	c, err := New(n, size, 4*n+4000*3200)
	require.NoError(t, err)
	defer c.Close()
	if !c.buf.Mapped() {
		t.Skip("the cache is not a mapping of its own")
	}
	page := os.Getpagesize()
	resident := func(lo, hi int) (in, all int) {
		vec := make([]byte, (hi-lo+page-1)/page)
		b := c.buf.B[lo:hi]
		_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
		require.Zero(t, e, "mincore")
		for _, v := range vec {
			in += int(v & 1)
		}
		return in, len(vec)
	}
	filled := aheadBytes/c.stride + 1 // into the second MiB
	for id := int32(0); id < int32(filled); id++ {
		c.Put(id, record(id, size))
	}
	lo := (filled*c.stride + page - 1) / page * page
	require.Eventually(t, func() bool { in, all := resident(lo, aheadBytes+2*aheadBytes-page); return in == all }, 5*time.Second, time.Millisecond,
		"the pages ahead of the fill are backed")
	in, _ := resident(4*aheadBytes, 8*aheadBytes)
	assert.Zero(t, in, "not the pages further on")
	for id := int32(0); id < int32(filled); id++ {
		rec, _, ok := c.Get(id)
		require.True(t, ok)
		require.Equal(t, record(id, size), rec, "populating changed no byte")
	}
}

// TestPopulateAheadAfterClose: a wake-up still queued when the cache
// closes does not touch the freed buffer (a panic on populateAhead's
// goroutine would end the process). A few rounds meet the race; 20 run,
// 200 with -tags long.
func TestPopulateAheadAfterClose(t *testing.T) {
	const n, size = 4000, 3136
	rounds := 20
	if longtests.On {
		rounds = 200
	}
	for range rounds {
		c, err := New(n, size, 4*n+4000*3200)
		require.NoError(t, err)
		for id := int32(0); id < int32(aheadBytes/c.stride+1); id++ {
			c.Put(id, record(id, size)) // the last one wakes populateAhead
		}
		require.NoError(t, c.Close())
	}
	time.Sleep(50 * time.Millisecond) // a late wake-up would panic here
}
