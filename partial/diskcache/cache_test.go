package diskcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
)

const testBS = 4096

// pattern is n bytes that differ from one block to the next.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i>>12) ^ seed
	}
	return b
}

// blockFile is the size of a full block's file.
var blockFile = headerSize(testBS) + testBS

func open(t *testing.T, obj Object, dir string, budget int64) *Cache {
	t.Helper()
	c, err := Open(obj, Options{Dir: dirOf(dir, budget), BlockSize: testBS})
	require.NoError(t, err)
	return c
}

// testDirs are the tests' Dirs, one per directory and budget, as a program
// keeps one per directory it serves.
var testDirs = struct {
	sync.Mutex
	m map[string]*Dir
}{m: map[string]*Dir{}}

// dirOf is the tests' Dir of path with budget.
func dirOf(path string, budget int64) *Dir {
	testDirs.Lock()
	defer testDirs.Unlock()
	k := fmt.Sprintf("%s\x00%d", path, budget)
	if testDirs.m[k] == nil {
		testDirs.m[k] = NewDir(path, budget)
	}
	return testDirs.m[k]
}

// onDisk counts the block files under dir and their bytes.
func onDisk(t *testing.T, dir string) (n int, bytes int64) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, blockExt) {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		bytes += info.Size()
		return nil
	}))
	return n, bytes
}

func read(t *testing.T, s partial.Storage, off, n int64) []byte {
	t.Helper()
	p := make([]byte, n)
	_, err := s.ReadAtContext(context.Background(), p, off, nil)
	require.NoError(t, err)
	return p
}

// TestConformance runs partial's suite on the cache: budgets that hold the
// file and that hold three blocks, objects with and without ReadBatch.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget int64
		batch  bool
	}{{"ample", 1 << 30, true}, {"three blocks", 3 * blockFile, true}, {"no batch reader", 1 << 30, false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			partialtest.Run(t, func(t *testing.T, path string) partial.Storage {
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				var obj Object = newFake("s3://b/"+path, "e1", data)
				if c.batch {
					obj = batchObject{obj.(*fakeObject)}
				}
				return open(t, obj, dir, c.budget)
			}, nil)
		})
	}
}

// TestHitAndMiss: a first read fetches from the object and writes the
// block; a second is served from disk, with no read of the object; stats
// and tallies say which.
func TestHitAndMiss(t *testing.T) {
	data := pattern(10*testBS+100, 1)
	obj := newFake("s3://b/k", "e1", data)
	dir := t.TempDir()
	c := open(t, obj, dir, 1<<20)
	defer c.Close()

	var tl partial.Tally
	p := make([]byte, 100)
	_, err := c.ReadAtContext(context.Background(), p, 5000, &tl)
	require.NoError(t, err)
	require.Equal(t, data[5000:5100], p)
	assert.Equal(t, int64(1), obj.reads.Load())
	assert.Equal(t, int64(testBS), obj.readBytes.Load(), "one whole block")
	assert.Equal(t, partial.Tally{CacheMisses: 1, DeviceReads: 1, DeviceBytes: testBS, ColdReads: 1, ColdBytes: testBS}, tl)
	n, b := onDisk(t, dir)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(blockFile), b)

	tl = partial.Tally{}
	clear(p)
	_, err = c.ReadAtContext(context.Background(), p, 5000, &tl)
	require.NoError(t, err)
	require.Equal(t, data[5000:5100], p)
	assert.Equal(t, int64(1), obj.reads.Load(), "served from disk")
	assert.Equal(t, partial.Tally{CacheHits: 1, DiskHits: 1, DiskBytes: 100}, tl, "the bytes read from disk")

	// ReadAtTiers counts where the bytes came from, nothing else.
	tl = partial.Tally{}
	_, err = c.ReadAtTiers(context.Background(), p, 4096, &tl)
	require.NoError(t, err)
	assert.Equal(t, partial.Tally{DiskHits: 1, DiskBytes: 100}, tl)
	_, err = c.ReadAtTiers(context.Background(), make([]byte, 50), int64(len(data)-50), &tl)
	require.NoError(t, err)
	assert.Equal(t, partial.Tally{DiskHits: 1, DiskBytes: 100, ColdReads: 1, ColdBytes: 100}, tl, "the tail block is 100 bytes")

	// A read across blocks: the ones on disk from there, the others fetched.
	got := read(t, c, 3000, 3*testBS)
	require.Equal(t, data[3000:3000+3*testBS], got)

	st := c.Stats()
	require.NotNil(t, st.Tiers)
	assert.Equal(t, int64(3), st.Tiers.DiskHits, "block 1 twice, then block 1 in the long read")
	assert.Equal(t, int64(5), st.Tiers.ColdReads, "blocks 1, 10, then 0, 2 and 3")
	assert.Equal(t, int64(4*testBS+100), st.Tiers.ColdBytes)
	assert.Equal(t, st.Tiers.DiskHits, st.CacheHits)
	assert.Equal(t, st.Tiers.ColdReads, st.CacheMisses)
	n, b = onDisk(t, dir)
	assert.Equal(t, 5, n)
	assert.Equal(t, b, st.Tiers.DiskUsedBytes)
	assert.Equal(t, int64(1<<20), st.Tiers.DiskBudgetBytes)
}

// TestEvictionUnderBudget: the files never exceed the budget, and the
// least recently used block leaves first.
func TestEvictionUnderBudget(t *testing.T) {
	data := pattern(20*testBS, 2)
	obj := newFake("s3://b/k", "e1", data)
	dir := t.TempDir()
	budget := int64(3*blockFile + 100)
	c := open(t, obj, dir, budget)
	defer c.Close()
	for _, blk := range []int64{0, 1, 2} {
		read(t, c, blk*testBS, 10)
	}
	read(t, c, 0, 10) // block 0 is now the most recent, block 1 the least
	require.Equal(t, int64(3), obj.reads.Load())
	read(t, c, 3*testBS, 10) // evicts block 1
	require.Equal(t, int64(4), obj.reads.Load())
	_, err := os.Stat(filepath.Join(c.od.path, blockName(1)))
	require.ErrorIs(t, err, fs.ErrNotExist, "block 1's file is removed")
	read(t, c, 0, 10)
	assert.Equal(t, int64(4), obj.reads.Load(), "block 0 stayed")
	read(t, c, testBS, 10)
	assert.Equal(t, int64(5), obj.reads.Load(), "block 1 was evicted")

	for i := range 40 { // many blocks through a small budget
		off := int64(i*7%20) * testBS
		require.Equal(t, data[off:off+testBS], read(t, c, off, testBS))
		_, b := onDisk(t, dir)
		require.LessOrEqual(t, b, budget)
	}
	n, b := onDisk(t, dir)
	assert.Equal(t, 3, n)
	assert.Equal(t, c.Stats().Tiers.DiskUsedBytes, b)
	assert.Positive(t, c.Stats().CacheEvictions)

	// A budget below one block caches nothing and still serves.
	c2 := open(t, newFake("s3://b/small", "e1", data), t.TempDir(), 100)
	defer c2.Close()
	require.Equal(t, data[:testBS], read(t, c2, 0, testBS))
	require.Equal(t, data[:testBS], read(t, c2, 0, testBS))
	assert.Zero(t, c2.Stats().Tiers.DiskHits)
	assert.Equal(t, int64(2), c2.Stats().Tiers.ColdReads)
}

// TestCorruptBlockRefetched: a block damaged on disk (its data, its header,
// cut short, emptied, or another version's) is detected, never served,
// dropped and fetched again.
func TestCorruptBlockRefetched(t *testing.T) {
	data := pattern(8*testBS, 3)
	other := pattern(8*testBS, 4)
	for _, c := range []struct {
		name   string
		damage func(path string)
	}{
		{"data byte", func(p string) { flip(t, p, headerSize(testBS)+1000) }},
		{"last data byte", func(p string) { flip(t, p, blockFile-1) }},
		{"header offset", func(p string) { flip(t, p, 25) }},
		{"magic", func(p string) { flip(t, p, 0) }},
		{"truncated", func(p string) { require.NoError(t, os.Truncate(p, headerSize(testBS)+10)) }},
		{"empty", func(p string) { require.NoError(t, os.Truncate(p, 0)) }},
		{"removed", func(p string) { require.NoError(t, os.Remove(p)) }},
		{"another version's block", func(p string) {
			// The same block written for another ETag, in place.
			c, err := Open(newFake("s3://b/x", "e2", other), Options{Dir: NewDir(t.TempDir(), 0), BlockSize: testBS})
			require.NoError(t, err)
			read(t, c, 2*testBS, 1)
			b, err := os.ReadFile(c.blockPath(2))
			require.NoError(t, err)
			require.NoError(t, c.Close())
			require.NoError(t, os.WriteFile(p, b, 0o600))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := newFake("s3://b/x", "e1", data)
			cc := open(t, obj, t.TempDir(), 1<<20)
			defer cc.Close()
			read(t, cc, 2*testBS, testBS)
			require.Equal(t, int64(1), obj.reads.Load())
			c.damage(cc.blockPath(2)) // before the file is opened for a disk hit
			require.Equal(t, data[2*testBS:3*testBS], read(t, cc, 2*testBS, testBS), "the object's bytes, not the damaged ones")
			assert.Equal(t, int64(2), obj.reads.Load(), "fetched again")
			if c.name != "removed" {
				assert.Equal(t, int64(1), cc.Stats().Tiers.DiskCorrupt)
			}
			require.Equal(t, data[2*testBS:3*testBS], read(t, cc, 2*testBS, testBS))
			assert.Equal(t, int64(2), obj.reads.Load(), "the block written again is served from disk")
			n, b := onDisk(t, filepath.Dir(filepath.Dir(cc.blockPath(2))))
			assert.Equal(t, 1, n)
			assert.Equal(t, cc.Stats().Tiers.DiskUsedBytes, b)
		})
	}
}

// TestCorruptOpenBlock: a block damaged on disk after its file was opened
// (and its header checked) is caught by the CRC of the chunk read; chunks
// not damaged are still served from disk.
func TestCorruptOpenBlock(t *testing.T) {
	const bs = 4 * chunkSize
	data := pattern(4*bs, 15)
	obj := newFake("s3://b/x", "e1", data)
	c, err := Open(obj, Options{Dir: NewDir(t.TempDir(), 0), BlockSize: bs})
	require.NoError(t, err)
	defer c.Close()
	read(t, c, bs, bs)                                    // fetched
	read(t, c, bs, 10)                                    // a disk hit: the file stays open
	flip(t, c.blockPath(1), headerSize(bs)+2*chunkSize+5) // chunk 2, in place
	require.Equal(t, data[bs:bs+100], read(t, c, bs, 100), "chunk 0 is sound")
	assert.Equal(t, int64(1), obj.reads.Load())
	require.Equal(t, data[bs+2*chunkSize:bs+2*chunkSize+10], read(t, c, bs+2*chunkSize, 10), "not the damaged byte")
	assert.Equal(t, int64(2), obj.reads.Load(), "chunk 2 failed its CRC: the block was fetched again")
	assert.Equal(t, int64(1), c.Stats().Tiers.DiskCorrupt)
	require.Equal(t, data[bs:2*bs], read(t, c, bs, bs))
	assert.Equal(t, int64(2), obj.reads.Load(), "the block written again is served from disk")
}

// TestOpenFilesBounded: block files kept open for warm reads are bounded,
// and an evicted block's file is closed with it.
func TestOpenFilesBounded(t *testing.T) {
	assert.Equal(t, 1024, openLimit(0))
	assert.Equal(t, 5000, openLimit(20000))
	assert.Equal(t, 16384, openLimit(1<<20))
	defer func(n int) { maxOpen = n }(maxOpen)
	maxOpen = 1000
	const blocks = 1100
	data := pattern(blocks*512, 16)
	budget := int64(blocks) * (headerSize(512) + 512)
	c, err := Open(newFake("s3://b/x", "e1", data), Options{Dir: NewDir(t.TempDir(), budget), BlockSize: 512})
	require.NoError(t, err)
	defer c.Close()
	for range 2 { // fetch, then a disk hit that opens the file
		for blk := range int64(blocks) {
			read(t, c, blk*512, 1)
		}
	}
	c.d.mu.Lock()
	assert.Equal(t, maxOpen, c.d.open.Len())
	c.d.mu.Unlock()
	c2, err := Open(newFake("s3://b/y", "e1", data), Options{Dir: c.home, BlockSize: 512}) // the same directory
	require.NoError(t, err)
	defer c2.Close()
	for blk := range int64(blocks) { // evicts every block of x
		read(t, c2, blk*512, 1)
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	for _, k := range c.d.open.Keys() {
		require.Equal(t, c2.od.id, k.obj, "x's evicted blocks are closed")
	}
	for _, k := range c.d.lru.Keys() {
		require.Equal(t, c2.od.id, k.obj)
	}
}

func flip(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[at] ^= 0x40
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// TestRestartReusesBlocks: a cache opened again on the same directory (a
// new process: the directory released, its index forgotten) serves the
// blocks on disk without reading the object, and keeps the LRU order of
// their writes.
func TestRestartReusesBlocks(t *testing.T) {
	data := pattern(10*testBS+7, 5)
	dir := t.TempDir()
	c := open(t, newFake("s3://b/k", "e1", data), dir, 1<<20)
	for blk := range int64(11) {
		read(t, c, blk*testBS, 1)
	}
	// Blocks written within one clock tick share an mtime: space them out
	// as writes further apart would be.
	base := time.Now().Add(-time.Hour)
	for blk := range int64(11) {
		at := base.Add(time.Duration(blk) * time.Second)
		require.NoError(t, os.Chtimes(c.blockPath(blk), at, at))
	}
	require.NoError(t, c.Close())
	assert.Nil(t, c.home.d, "the last Close released the directory")
	lock, err := lockFile(filepath.Join(dir, lockName))
	require.NoError(t, err, "unlocked")
	require.NoError(t, unlockFile(lock))

	obj := newFake("s3://b/k", "e1", data)
	c = open(t, obj, dir, 1<<20)
	require.Equal(t, data, read(t, c, 0, int64(len(data))))
	assert.Zero(t, obj.reads.Load(), "every block from disk")
	assert.Equal(t, int64(11), c.Stats().Tiers.DiskHits)
	require.NoError(t, c.Close())

	// Reopened with a budget of 4 blocks: trimmed to the 4 written last.
	obj = newFake("s3://b/k", "e1", data)
	c = open(t, obj, dir, 4*blockFile)
	defer c.Close()
	n, b := onDisk(t, dir)
	assert.Equal(t, 4, n)
	assert.LessOrEqual(t, b, int64(4*blockFile))
	_ = read(t, c, 10*testBS, 7)
	_ = read(t, c, 7*testBS, testBS)
	assert.Zero(t, obj.reads.Load())
	_ = read(t, c, 0, 1)
	assert.Equal(t, int64(1), obj.reads.Load())
}

// TestVersionChangeDiscards: an object opened with another ETag (or size)
// than its blocks were cached for has them discarded and reads the new
// bytes; a Cache still open on the old version stops using the disk.
func TestVersionChangeDiscards(t *testing.T) {
	v1 := pattern(6*testBS, 6)
	v2 := pattern(6*testBS, 7)
	dir := t.TempDir()
	c1 := open(t, newFake("s3://b/k", "e1", v1), dir, 1<<20)
	require.Equal(t, v1, read(t, c1, 0, int64(len(v1))))
	n, _ := onDisk(t, dir)
	require.Equal(t, 6, n)

	obj2 := newFake("s3://b/k", "e2", v2)
	c2 := open(t, obj2, dir, 1<<20)
	n, _ = onDisk(t, dir)
	assert.Zero(t, n, "e1's blocks are gone")
	assert.Zero(t, c2.Stats().Tiers.DiskUsedBytes)
	require.Equal(t, v2, read(t, c2, 0, int64(len(v2))))
	assert.Equal(t, int64(6), obj2.reads.Load())
	require.Equal(t, v2, read(t, c2, 0, int64(len(v2))))
	assert.Equal(t, int64(6), obj2.reads.Load(), "e2's blocks from disk")

	// The old Cache reads its own object, not e2's blocks, and writes none.
	obj1 := c1.obj.(*fakeObject)
	before := obj1.reads.Load()
	require.Equal(t, v1[testBS:2*testBS], read(t, c1, testBS, testBS))
	assert.Equal(t, before+1, obj1.reads.Load())
	require.NoError(t, c1.Close())
	require.NoError(t, c2.Close())

	// A restart with a third version: the meta file says e2, so e2's
	// blocks are discarded at open.
	v3 := append(pattern(3*testBS, 8), 1)
	obj3 := newFake("s3://b/k", "e3", v3)
	c3 := open(t, obj3, dir, 1<<20)
	defer c3.Close()
	n, _ = onDisk(t, dir)
	assert.Zero(t, n)
	require.Equal(t, v3, read(t, c3, 0, int64(len(v3))))
	m, err := os.ReadFile(filepath.Join(c3.od.path, MetaName))
	require.NoError(t, err)
	assert.Contains(t, string(m), `"etag":"e3"`)

	// Another block size is another version too.
	require.NoError(t, c3.Close())
	c4, err := Open(newFake("s3://b/k", "e3", v3), Options{Dir: NewDir(dir, 0), BlockSize: 2 * testBS})
	require.NoError(t, err)
	defer c4.Close()
	n, _ = onDisk(t, dir)
	assert.Zero(t, n)
}

// TestConcurrentReadersOneFetch: callers missing the same block at once
// wait for one fetch; all get the right bytes.
func TestConcurrentReadersOneFetch(t *testing.T) {
	data := pattern(4*testBS, 9)
	obj := newFake("s3://b/k", "e1", data)
	obj.gate = make(chan struct{})
	c := open(t, obj, t.TempDir(), 1<<20)
	defer c.Close()
	const readers = 8
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 100)
			off := int64(testBS + i*100)
			if _, err := c.ReadAtContext(context.Background(), p, off, nil); err != nil {
				errs <- err
			} else if !bytes.Equal(p, data[off:off+100]) {
				errs <- errors.New("wrong bytes")
			}
		}()
	}
	// Wait until one reader is at the object and the others wait for it.
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		cl := c.inflight[1]
		return cl != nil && cl.waiters == readers-1
	}, 10*time.Second, time.Millisecond)
	close(obj.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int64(1), obj.entered.Load(), "one fetch")
	assert.Equal(t, int64(readers), c.Stats().Tiers.ColdReads, "each waiter's block came from the object")
	n, _ := onDisk(t, filepath.Dir(c.od.path))
	assert.Equal(t, 1, n)
}

// TestBatchOneFetch: a batch's blocks not on disk go to the object in one
// ReadBatch; a failed fetch fails its requests only, and caches nothing.
func TestBatchOneFetch(t *testing.T) {
	data := pattern(16*testBS, 10)
	f := newFake("s3://b/k", "e1", data)
	c := open(t, batchObject{f}, t.TempDir(), 1<<20)
	defer c.Close()
	read(t, c, 2*testBS, 1)
	read(t, c, 5*testBS, 1)
	reqs := []partial.ReadReq{
		{Off: 2*testBS + 10, Buf: make([]byte, 100)},    // on disk
		{Off: 3*testBS - 50, Buf: make([]byte, 100)},    // blocks 2 (disk) and 3
		{Off: 5 * testBS, Buf: make([]byte, testBS)},    // on disk
		{Off: 7 * testBS, Buf: make([]byte, 2*testBS)},  // 7 and 8
		{Off: 7*testBS + 5, Buf: make([]byte, 10)},      // within 7 again
		{Off: 15 * testBS, Buf: make([]byte, testBS+1)}, // past the end
	}
	err := c.ReadBatch(context.Background(), reqs)
	require.Error(t, err)
	for i, q := range reqs[:5] {
		require.NoError(t, q.Err, i)
		require.Equal(t, data[q.Off:q.Off+int64(len(q.Buf))], q.Buf, i)
	}
	require.ErrorContains(t, reqs[5].Err, "past the end")
	assert.Equal(t, []int{3}, f.sizes()[len(f.sizes())-1:], "blocks 3, 7 and 8 in one batch")
	assert.Equal(t, int64(1), f.batches.Load())
	assert.Equal(t, partial.Tally{CacheHits: 1, DiskHits: 1, DiskBytes: 3*testBS - (2*testBS + 10)}, reqs[0].IO,
		"block 2's bytes the batch needs, from the first request's start to the block's end")
	assert.Equal(t, partial.Tally{CacheMisses: 1, DeviceReads: 1, DeviceBytes: testBS, ColdReads: 1, ColdBytes: testBS}, reqs[1].IO, "block 3")
	assert.Equal(t, int64(2), reqs[3].IO.ColdReads)
	assert.Zero(t, reqs[4].IO, "block 7 is counted in the first request that spans it")

	f.failAt, f.failEnabled = 12*testBS+3, true
	reqs = []partial.ReadReq{{Off: 11 * testBS, Buf: make([]byte, 10)}, {Off: 12 * testBS, Buf: make([]byte, 10)}}
	require.ErrorContains(t, c.ReadBatch(context.Background(), reqs), "injected failure")
	require.NoError(t, reqs[0].Err)
	require.Equal(t, data[11*testBS:11*testBS+10], reqs[0].Buf)
	require.ErrorContains(t, reqs[1].Err, "injected failure")
	f.failEnabled = false
	before := f.reads.Load()
	require.Equal(t, data[12*testBS:12*testBS+10], read(t, c, 12*testBS, 10))
	assert.Equal(t, before+1, f.reads.Load(), "the failed block was not cached")
}

// TestBehindBlockCache: under a block cache (as storage.Open stacks them)
// the tiers are counted where each read was served: memory, disk, object.
func TestBehindBlockCache(t *testing.T) {
	data := pattern(32*testBS, 11)
	dir := t.TempDir()
	f := newFake("s3://b/k", "e1", data)
	dc := open(t, batchObject{f}, dir, 1<<20)
	bc, err := blockcache.NewCached("s3://b/k", dc, nil, 1<<20, testBS)
	require.NoError(t, err)
	var tl partial.Tally
	p := make([]byte, 10)
	_, err = bc.ReadAtContext(context.Background(), p, 3*testBS, &tl)
	require.NoError(t, err)
	assert.Equal(t, partial.Tally{CacheMisses: 1, DeviceReads: 1, DeviceBytes: testBS, ColdReads: 1, ColdBytes: testBS}, tl)
	tl = partial.Tally{}
	_, err = bc.ReadAtContext(context.Background(), p, 3*testBS+5, &tl)
	require.NoError(t, err)
	assert.Equal(t, partial.Tally{CacheHits: 1}, tl, "from memory")
	reqs := []partial.ReadReq{{Off: 5 * testBS, Buf: make([]byte, 10)}, {Off: 6 * testBS, Buf: make([]byte, 10)}}
	require.NoError(t, bc.ReadBatch(context.Background(), reqs))
	assert.Equal(t, int64(2), reqs[0].IO.ColdReads+reqs[1].IO.ColdReads, "the batch's blocks came from the object")
	assert.Equal(t, int64(1), f.batches.Load())
	st := bc.Stats()
	require.NotNil(t, st.Tiers)
	assert.Equal(t, int64(1), st.Tiers.MemoryHits)
	assert.Equal(t, int64(testBS), st.Tiers.MemoryBytes)
	assert.Equal(t, int64(3), st.Tiers.ColdReads)
	assert.Zero(t, st.Tiers.DiskHits)
	require.NoError(t, bc.Close())
	assert.True(t, f.closed.Load(), "closing the stack closes the object")

	// A new stack on the same directory: memory misses are disk hits.
	f = newFake("s3://b/k", "e1", data)
	dc = open(t, batchObject{f}, dir, 1<<20)
	bc, err = blockcache.NewCached("s3://b/k", dc, nil, 1<<20, testBS)
	require.NoError(t, err)
	defer bc.Close()
	tl = partial.Tally{}
	_, err = bc.ReadAtContext(context.Background(), p, 3*testBS, &tl)
	require.NoError(t, err)
	assert.Equal(t, partial.Tally{CacheMisses: 1, DeviceReads: 1, DeviceBytes: testBS, DiskHits: 1, DiskBytes: testBS}, tl)
	reqs = []partial.ReadReq{{Off: 5 * testBS, Buf: make([]byte, 10)}, {Off: 6 * testBS, Buf: make([]byte, 10)}}
	require.NoError(t, bc.ReadBatch(context.Background(), reqs))
	assert.Equal(t, data[6*testBS:6*testBS+10], reqs[1].Buf)
	assert.Equal(t, int64(2), reqs[0].IO.DiskHits+reqs[1].IO.DiskHits)
	assert.Zero(t, f.reads.Load())
	st = bc.Stats()
	assert.Equal(t, int64(3), st.Tiers.DiskHits)
	assert.Zero(t, st.Tiers.ColdReads)
}

// TestDirectoryRules: a non-empty directory that is not a cache is
// refused (nothing in it touched), a directory in use by another process
// (or another Dir) is refused, and the Caches of one Dir share it.
func TestDirectoryRules(t *testing.T) {
	data := pattern(testBS, 12)
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "precious.txt"), []byte("x"), 0o600))
	_, err := Open(newFake("s3://b/k", "e", data), Options{Dir: NewDir(foreign, 0)})
	require.ErrorIs(t, err, partial.ErrBadOption)
	require.ErrorContains(t, err, "not a faiss-sidecar cache")
	_, err = os.Stat(filepath.Join(foreign, "precious.txt"))
	require.NoError(t, err)

	dir := t.TempDir()
	c := open(t, newFake("s3://b/k", "e", data), dir, 1<<20)
	_, err = Open(newFake("s3://b/j", "e", data), Options{Dir: NewDir(dir, 2<<20)})
	require.ErrorContains(t, err, "in use", "another Dir of the same directory")
	c2, err := Open(newFake("s3://b/j", "e", data), Options{Dir: c.home, BlockSize: testBS}) // shared
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c2.Close())

	lock, err := lockFile(filepath.Join(dir, lockName)) // another process's lock
	require.NoError(t, err)
	_, err = Open(newFake("s3://b/k", "e", data), Options{Dir: NewDir(dir, 0)})
	require.ErrorContains(t, err, "another process")
	require.NoError(t, unlockFile(lock))

	_, err = Open(newFake("s3://b/k", "", data), Options{Dir: NewDir(dir, 0)})
	require.ErrorIs(t, err, partial.ErrBadOption, "no ETag")
	_, err = Open(newFake("s3://b/k", "e", data), Options{Dir: NewDir(dir, -1)})
	require.ErrorIs(t, err, partial.ErrBadOption)
	_, err = Open(newFake("s3://b/k", "e", data), Options{Dir: NewDir(dir, 0), BlockSize: 1000})
	require.ErrorIs(t, err, partial.ErrBadOption)
	_, err = Open(newFake("s3://b/k", "e", data), Options{})
	require.ErrorIs(t, err, partial.ErrBadOption)
}

// TestCrashLeftovers: what a crash leaves (temporary files, a subdirectory
// without its meta file, a block of the wrong length) is removed at open;
// the good blocks stay.
func TestCrashLeftovers(t *testing.T) {
	data := pattern(4*testBS, 13)
	dir := t.TempDir()
	c := open(t, newFake("s3://b/k", "e1", data), dir, 1<<20)
	read(t, c, 0, int64(len(data)))
	od := c.od.path
	require.NoError(t, c.Close())
	tmp := filepath.Join(od, blockName(0)+tmpInfix+"99")
	require.NoError(t, os.WriteFile(tmp, []byte("half a block"), 0o600))
	require.NoError(t, os.Truncate(filepath.Join(od, blockName(3)), 100))
	orphan := filepath.Join(dir, objectDirName("s3://b/orphan"))
	require.NoError(t, os.MkdirAll(orphan, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(orphan, blockName(0)), []byte("no meta"), 0o600))
	other := filepath.Join(dir, "not-ours")
	require.NoError(t, os.WriteFile(other, nil, 0o600))

	obj := newFake("s3://b/k", "e1", data)
	c = open(t, obj, dir, 1<<20)
	defer c.Close()
	for _, gone := range []string{tmp, filepath.Join(od, blockName(3)), orphan} {
		_, err := os.Stat(gone)
		require.ErrorIs(t, err, fs.ErrNotExist, gone)
	}
	_, err := os.Stat(other)
	require.NoError(t, err, "a file the cache does not recognise is left alone")
	require.Equal(t, data, read(t, c, 0, int64(len(data))))
	assert.Equal(t, int64(1), obj.reads.Load(), "only block 3 fetched")
}

// TestAlignedBlockCacheMatchesDiskBlocks: a block cache asked to align an
// offset (its mirror pads the blocks) keeps the disk cache's block grid
// over it, so one memory miss is one disk block.
func TestAlignedBlockCacheMatchesDiskBlocks(t *testing.T) {
	data := pattern(16*testBS, 14)
	dc := open(t, newFake("s3://b/k", "e1", data), t.TempDir(), 1<<20)
	bc, err := blockcache.NewCachedAligned("s3://b/k", dc, nil, 1<<20, testBS, 4099)
	require.NoError(t, err)
	defer bc.Close()
	for blk := range int64(16) {
		var tl partial.Tally
		p := make([]byte, 10)
		_, err := bc.ReadAtContext(context.Background(), p, blk*testBS+100, &tl)
		require.NoError(t, err)
		require.Equal(t, data[blk*testBS+100:blk*testBS+110], p)
		require.Equal(t, int64(1), tl.ColdReads, "block %d", blk)
		require.Equal(t, int64(testBS), tl.ColdBytes, "block %d", blk)
		require.Zero(t, tl.DiskHits, "block %d: no neighbour's disk block read", blk)
	}
}

// TestHold: a held directory is locked against other processes until
// released (once, however often release is called), shared by the caches
// opened on its Dir with its budget, and refused when another process
// holds it.
func TestHold(t *testing.T) {
	dir := t.TempDir()
	home := NewDir(dir, 1<<20)
	release, err := home.Hold()
	require.NoError(t, err)
	_, err = lockFile(filepath.Join(dir, lockName))
	require.ErrorContains(t, err, "another process", "held")
	c, err := Open(newFake("s3://b/k", "e", pattern(testBS, 20)), Options{Dir: home, BlockSize: testBS})
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), c.Stats().Tiers.DiskBudgetBytes)
	require.NoError(t, release())
	require.NoError(t, release(), "once")
	_, err = lockFile(filepath.Join(dir, lockName))
	require.ErrorContains(t, err, "another process", "the open cache still holds it")
	require.NoError(t, c.Close())
	lock, err := lockFile(filepath.Join(dir, lockName)) // another process's
	require.NoError(t, err)
	_, err = NewDir(dir, 0).Hold()
	require.ErrorContains(t, err, "another process")
	require.NoError(t, unlockFile(lock))
	_, err = NewDir(dir, -1).Hold()
	require.ErrorIs(t, err, partial.ErrBadOption)
}
