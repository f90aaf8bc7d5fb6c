package diskcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// Defaults of Options.
const (
	// DefaultBudget is the bytes of blocks a cache directory holds when no
	// budget is given (--cache-dir-bytes 0, "cache_dir_bytes": 0).
	DefaultBudget = 10 << 30
	// DefaultBlockSize is the block size when none is given: the s3
	// backend's (s3.DefaultBlockSize).
	DefaultBlockSize = 64 << 10
)

// Object is what a Cache fronts: a Storage with a name and a version
// (s3.Object is one).
type Object interface {
	partial.Storage
	// Name names the object (an s3:// URL); a hash of it names the
	// object's subdirectory.
	Name() string
	// ETag is the version the object serves; blocks cached for another
	// ETag (or size, or block size) are discarded at Open.
	ETag() string
}

// Options configures Open.
type Options struct {
	// Dir is the cache directory (NewDir: created if missing; an existing
	// one must be empty or a cache directory already), shared with every
	// other Cache opened on the same Dir: its budget bounds the bytes of
	// the block files of all their objects together.
	Dir *Dir
	// BlockSize is the size of the cached blocks, a power of two from 512
	// to 64 MiB (0: DefaultBlockSize). Blocks cached with another size are
	// discarded.
	BlockSize int
}

// CheckBudget is the rule for a cache directory's budget: not negative (0:
// DefaultBudget). Errors match partial.ErrBadOption.
func CheckBudget(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: disk cache budget %d is negative (0: %d bytes)", partial.ErrBadOption, n, int64(DefaultBudget))
	}
	return nil
}

// Cache is an Object behind a local disk cache. It implements
// partial.Storage, BatchReader, TierReader, FileChecker and StatsReporter.
type Cache struct {
	obj   Object
	batch partial.BatchReader // obj's, nil if it has none
	home  *Dir                // the Dir it was opened on
	d     *dir                // home's open directory
	od    *objDir
	v     version
	name  string
	bs    int64
	size  int64
	life  backendkit.Life

	mu       sync.Mutex
	inflight map[int64]*call // blocks being fetched, by number

	requests, bytesRequested atomic.Int64
	diskHits, diskBytes      atomic.Int64
	coldReads, coldBytes     atomic.Int64
	corrupt, writeErrors     atomic.Int64
}

// call is one fetch of a block that other callers may wait for.
type call struct {
	done    chan struct{}
	waiters int    // guarded by Cache.mu
	data    []byte // the block, for the waiters (read-only)
	err     error
	gaveUp  bool // the fetcher's context ended: err is not the block's
}

// Open puts the disk cache o describes in front of obj. Closing the Cache
// closes obj.
func Open(obj Object, o Options) (*Cache, error) {
	if o.Dir == nil || o.Dir.path == "" {
		return nil, fmt.Errorf("%w: diskcache: no cache directory", partial.ErrBadOption)
	}
	if err := CheckBudget(o.Dir.budget); err != nil {
		return nil, err
	}
	bs := int64(o.BlockSize)
	if bs == 0 {
		bs = DefaultBlockSize
	}
	if err := checkBlockSize(bs); err != nil {
		return nil, fmt.Errorf("%w: diskcache: %v", partial.ErrBadOption, err)
	}
	m := meta{Format: 1, Name: obj.Name(), ETag: obj.ETag(), Size: obj.Size(), BlockSize: bs}
	if m.Name == "" || m.ETag == "" {
		return nil, fmt.Errorf("%w: diskcache: object %q has no name or no ETag: its blocks could not be told from another version's", partial.ErrBadOption, m.Name)
	}
	d, err := o.Dir.acquire()
	if err != nil {
		return nil, err
	}
	od, err := d.attach(m)
	if err != nil {
		o.Dir.release(d)
		return nil, err
	}
	c := &Cache{obj: obj, home: o.Dir, d: d, od: od, v: versionOf(m), name: m.Name, bs: bs, size: m.Size, inflight: map[int64]*call{}}
	c.batch, _ = obj.(partial.BatchReader)
	c.life.Free = func() error {
		err := obj.Close()
		if e := o.Dir.release(d); err == nil {
			err = e
		}
		return err
	}
	return c, nil
}

func (c *Cache) Size() int64 { return c.size }

// Name is the object's name.
func (c *Cache) Name() string { return c.name }

// BlockSize is the size of the cached blocks.
func (c *Cache) BlockSize() int64 { return c.bs }

// Inner is the object behind the cache.
func (c *Cache) Inner() Object { return c.obj }

// Close closes the object and releases the directory once reads in flight
// end; the blocks stay on disk. A second Close returns ErrClosed.
func (c *Cache) Close() error { return c.life.Close(c.name) }

// ReadAtContext reads p at off, counting in t (when not nil) each block a
// disk hit (CacheHits, DiskHits) or a fetch (CacheMisses, a device read,
// ColdReads). It fails at once under a ctx that has ended; its fetches
// from the object, and its waits for another caller's, give up when ctx
// ends.
func (c *Cache) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	return c.readOne(ctx, p, off, t, false)
}

// ReadAtTiers (partial.TierReader) is ReadAtContext that counts in t only
// where each block came from: DiskHits or ColdReads, and their bytes.
func (c *Cache) ReadAtTiers(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	return c.readOne(ctx, p, off, t, true)
}

func (c *Cache) readOne(ctx context.Context, p []byte, off int64, t *partial.Tally, tiersOnly bool) (int, error) {
	if !c.life.Acquire() {
		return 0, backendkit.Closed(c.name)
	}
	defer c.life.Release()
	if err := partial.Interrupted(ctx); err != nil {
		return 0, fmt.Errorf("%s: read of %d bytes at offset %d given up: %w", c.name, len(p), off, err)
	}
	reqs := [1]partial.ReadReq{{Off: off, Buf: p}}
	c.serve(ctx, reqs[:], tiersOnly)
	if t != nil {
		t.Add(&reqs[0].IO)
	}
	if reqs[0].Err != nil {
		return 0, reqs[0].Err
	}
	return len(p), nil
}

// ReadBatch (partial.BatchReader) serves every request: the blocks they
// span that are on disk from there, the others fetched from the object in
// one ReadBatch. Each block is counted (as ReadAtContext counts) in the
// first request that spans it. Fetches and waits give up when ctx ends.
func (c *Cache) ReadBatch(ctx context.Context, reqs []partial.ReadReq) error {
	if !c.life.Acquire() {
		return backendkit.Closed(c.name)
	}
	defer c.life.Release()
	if err := partial.Interrupted(ctx); err != nil {
		err = fmt.Errorf("%s: batch of %d reads given up: %w", c.name, len(reqs), err)
		for i := range reqs {
			reqs[i].Err = err
		}
		return err
	}
	c.serve(ctx, reqs, false)
	for i := range reqs {
		if reqs[i].Err != nil {
			return reqs[i].Err
		}
	}
	return nil
}

// span is block blk's range of the object.
func (c *Cache) span(blk int64) (start, end int64) {
	return blk * c.bs, min((blk+1)*c.bs, c.size)
}

// use is one block a request spans.
type use struct {
	blk int64
	req int
}

// slot is one block a serve reads.
type slot struct {
	blk    int64
	lo, hi int64  // the part of the object the requests need from it
	dst    []byte // where [lo, hi) goes: its owner request's buffer, or its own
	owner  int    // the request whose buffer dst is (-1: none)
	first  int    // the first request that spans it (its tally counts it)
	full   []byte // the whole block, when fetched
	lead   *call  // the fetch this serve makes for it
	wait   *call  // the fetch of another caller it waits for
	cold   bool   // fetched (or waited for) rather than read from disk
	err    error
}

// serve fills reqs (setting each one's Err), counting in their tallies
// (tier counts only with tiersOnly).
func (c *Cache) serve(ctx context.Context, reqs []partial.ReadReq, tiersOnly bool) {
	var usesArr [8]use
	uses := usesArr[:0]
	for i := range reqs {
		q := &reqs[i]
		c.requests.Add(1)
		c.bytesRequested.Add(int64(len(q.Buf)))
		if q.Err = backendkit.CheckRange(c.name, q.Off, int64(len(q.Buf)), c.size); q.Err != nil || len(q.Buf) == 0 {
			continue
		}
		for blk := q.Off / c.bs; blk <= (q.Off+int64(len(q.Buf))-1)/c.bs; blk++ {
			uses = append(uses, use{blk, i})
		}
	}
	if len(uses) == 0 {
		return
	}
	if len(uses) > 1 {
		slices.SortFunc(uses, func(a, b use) int {
			if r := cmp.Compare(a.blk, b.blk); r != 0 {
				return r
			}
			return cmp.Compare(a.req, b.req)
		})
	}
	var slotsArr [8]slot
	slots := slotsArr[:0]
	for i, u := range uses {
		start, end := c.span(u.blk)
		q := &reqs[u.req]
		lo, hi := max(start, q.Off), min(end, q.Off+int64(len(q.Buf)))
		if i == 0 || uses[i-1].blk != u.blk {
			slots = append(slots, slot{blk: u.blk, lo: lo, hi: hi, owner: -1, first: u.req})
		}
		s := &slots[len(slots)-1]
		s.lo, s.hi = min(s.lo, lo), max(s.hi, hi)
	}
	// Each slot's bytes go straight into a request that needs all of them
	// (the usual case: one request a block), else into a buffer of its own.
	for _, u := range uses {
		s := &slots[slotIndex(slots, u.blk)]
		if q := &reqs[u.req]; s.owner < 0 && q.Off <= s.lo && s.hi <= q.Off+int64(len(q.Buf)) {
			s.owner, s.dst = u.req, q.Buf[s.lo-q.Off:s.hi-q.Off]
		}
	}
	missing := 0
	for i := range slots {
		s := &slots[i]
		if s.dst == nil {
			s.dst = make([]byte, s.hi-s.lo)
		}
		if !c.readDisk(s) {
			s.cold = true
			missing++
		}
	}
	if missing > 0 {
		c.fetch(ctx, slots)
	}
	// Copy each slot to the requests that need it without owning it, and
	// count it in the first one.
	for _, u := range uses {
		s := &slots[slotIndex(slots, u.blk)]
		q := &reqs[u.req]
		if s.err != nil {
			if q.Err == nil {
				q.Err = s.err
			}
			continue
		}
		if u.req != s.owner {
			lo, hi := max(s.lo, q.Off), min(s.hi, q.Off+int64(len(q.Buf)))
			copy(q.Buf[lo-q.Off:hi-q.Off], s.dst[lo-s.lo:])
		}
		if u.req == s.first {
			c.count(&q.IO, s, tiersOnly)
		}
	}
}

// slotIndex finds blk's slot (slots are sorted by block).
func slotIndex(slots []slot, blk int64) int {
	if len(slots) == 1 {
		return 0
	}
	i, _ := slices.BinarySearchFunc(slots, blk, func(s slot, b int64) int { return cmp.Compare(s.blk, b) })
	return i
}

// count records a block served to t's caller, in the cache's statistics
// and in t: a disk hit's bytes are those read, a fetch's the whole block's.
func (c *Cache) count(t *partial.Tally, s *slot, tiersOnly bool) {
	if s.cold {
		n := int64(len(s.full))
		c.coldReads.Add(1)
		c.coldBytes.Add(n)
		t.ColdReads++
		t.ColdBytes += n
	} else {
		n := s.hi - s.lo
		c.diskHits.Add(1)
		c.diskBytes.Add(n)
		t.DiskHits++
		t.DiskBytes += n
	}
	if !tiersOnly {
		t.CountLookup(!s.cold, int64(len(s.full)))
	}
}

// fetch gets the cold slots' blocks from the object: those nobody is
// fetching in one batch (then written to disk), the others by waiting for
// the caller that fetches them. Fetches and waits give up when ctx ends; a
// waiter whose fetcher gave up for its own context fetches the block
// itself.
func (c *Cache) fetch(ctx context.Context, slots []slot) {
	c.mu.Lock()
	for i := range slots {
		s := &slots[i]
		if !s.cold {
			continue
		}
		if cl := c.inflight[s.blk]; cl != nil {
			cl.waiters++
			s.wait = cl
		} else {
			s.lead = &call{done: make(chan struct{})}
			c.inflight[s.blk] = s.lead
		}
	}
	c.mu.Unlock()
	// Lead first, then wait: two callers each waiting on the other's block
	// have both finished their own fetches by then.
	var reqs []partial.ReadReq
	for i := range slots {
		if s := &slots[i]; s.lead != nil {
			start, end := c.span(s.blk)
			s.full = make([]byte, end-start)
			reqs = append(reqs, partial.ReadReq{Off: start, Buf: s.full})
		}
	}
	if len(reqs) > 0 {
		if c.batch != nil && len(reqs) > 1 {
			c.batch.ReadBatch(ctx, reqs) // each request carries its error
		} else {
			for i := range reqs {
				_, reqs[i].Err = c.obj.ReadAtContext(ctx, reqs[i].Buf, reqs[i].Off, nil)
			}
		}
		gaveUp := partial.Interrupted(ctx) != nil
		j := 0
		for i := range slots {
			if s := &slots[i]; s.lead != nil {
				if s.err = reqs[j].Err; s.err == nil {
					c.store(s.blk, s.full)
				}
				j++
			}
		}
		c.mu.Lock()
		for i := range slots {
			if s := &slots[i]; s.lead != nil {
				delete(c.inflight, s.blk)
				// full is this serve's own and never written again: the
				// waiters share it.
				s.lead.err, s.lead.data = s.err, s.full
				s.lead.gaveUp = gaveUp && s.err != nil
			}
		}
		c.mu.Unlock()
		for i := range slots {
			if s := &slots[i]; s.lead != nil {
				close(s.lead.done)
			}
		}
	}
	for i := range slots {
		s := &slots[i]
		if s.wait != nil {
			select {
			case <-s.wait.done:
				s.err, s.full = s.wait.err, s.wait.data
				if s.err != nil && s.wait.gaveUp && partial.Interrupted(ctx) == nil {
					start, end := c.span(s.blk)
					s.full = make([]byte, end-start)
					if _, s.err = c.obj.ReadAtContext(ctx, s.full, start, nil); s.err == nil {
						c.store(s.blk, s.full)
					}
				}
			case <-ctx.Done():
				s.err = fmt.Errorf("%s: waiting for block %d, which another read is fetching: %w", c.name, s.blk, context.Cause(ctx))
			}
		}
		if s.cold && s.err == nil {
			start, _ := c.span(s.blk)
			copy(s.dst, s.full[s.lo-start:])
		}
	}
}

// blockPath is block blk's file.
func (c *Cache) blockPath(blk int64) string { return filepath.Join(c.od.path, blockName(blk)) }

// readDisk fills s.dst with [s.lo, s.hi) of block s.blk from disk when the
// block is there and the chunks read are sound; a block that fails a check
// is dropped (and fetched again by the caller).
func (c *Cache) readDisk(s *slot) bool {
	k := key{c.od.id, s.blk}
	e, ob, ok := c.d.lookup(c.od, c.v, k)
	if !ok {
		return false
	}
	start, end := c.span(s.blk)
	n := end - start
	var err error
	if ob == nil {
		if ob, err = c.openBlock(s.blk, start, n); err == nil && !c.d.keepOpen(k, e, ob) {
			defer ob.f.Close()
		}
	}
	if err == nil {
		err = c.readChunks(ob, start, n, s.lo-start, s.dst)
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, os.ErrClosed):
		// Evicted (or the directory released) while being read: a miss.
	case errors.Is(err, fs.ErrNotExist):
		c.d.drop(c.od, k, e, false)
	default:
		c.corrupt.Add(1)
		c.d.drop(c.od, k, e, true)
	}
	return false
}

// openBlock opens block blk's file and checks its header: the n-byte block
// at off of this version.
func (c *Cache) openBlock(blk, off, n int64) (*openBlock, error) {
	f, err := os.Open(c.blockPath(blk))
	if err != nil {
		return nil, err
	}
	hb := make([]byte, headerSize(n))
	_, err = f.ReadAt(hb, 0)
	var h header
	if err == nil {
		h, err = decodeHeader(hb)
	}
	if err == nil {
		err = h.check(c.v, off, n, 0, nil)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &openBlock{f: f, h: h}, nil
}

// readChunks reads bytes [lo, lo+len(dst)) of the n-byte block at off
// from its open file into dst, checking the chunks read.
func (c *Cache) readChunks(ob *openBlock, off, n, lo int64, dst []byte) error {
	hi := lo + int64(len(dst))
	first, last := lo/chunkSize, (hi-1)/chunkSize
	cs, ce := first*chunkSize, min((last+1)*chunkSize, n) // the chunks' bytes
	data := dst
	if cs != lo || ce != hi { // not whole chunks: read them aside
		data = make([]byte, ce-cs)
	}
	if _, err := ob.f.ReadAt(data, headerSize(n)+cs); err != nil {
		return err
	}
	if err := ob.h.check(c.v, off, n, first, data); err != nil {
		return err
	}
	if cs != lo || ce != hi {
		copy(dst, data[lo-cs:])
	}
	return nil
}

// store writes block blk to disk, within the budget; a block that does not
// fit, or cannot be written (counted), is simply not cached.
func (c *Cache) store(blk int64, data []byte) {
	n := headerSize(int64(len(data))) + int64(len(data))
	if !c.d.current(c.od, c.v) || !c.d.reserve(n) {
		return
	}
	start, _ := c.span(blk)
	if err := writeFileAtomic(c.blockPath(blk), encodeHeader(c.v, start, data), data); err != nil {
		c.writeErrors.Add(1)
		c.d.unreserve(n)
		return
	}
	c.d.commit(c.od, c.v, key{c.od.id, blk}, n)
}

// CheckFile forwards to the object (nil when it is not a
// partial.FileChecker).
func (c *Cache) CheckFile(ctx context.Context) error {
	if f, ok := c.obj.(partial.FileChecker); ok {
		return f.CheckFile(ctx)
	}
	return nil
}

// CheckFD forwards to the object (nil when it is not a
// partial.FileChecker).
func (c *Cache) CheckFD() error {
	if f, ok := c.obj.(partial.FileChecker); ok {
		return f.CheckFD()
	}
	return nil
}

// Stats (partial.StatsReporter): Requests and BytesRequested are the
// cache's callers'; CacheHits and CacheMisses its disk hits and blocks
// fetched; CacheEvictions the directory's; ReadCalls, BytesRead and
// ResidentBytes the object's. Tiers has the disk and cold counts and the
// directory's use.
func (c *Cache) Stats() partial.Stats {
	s := partial.Stats{
		Requests: c.requests.Load(), BytesRequested: c.bytesRequested.Load(),
		CacheHits: c.diskHits.Load(), CacheMisses: c.coldReads.Load(), CacheEvictions: c.d.evicted.Load(),
	}
	if r, ok := c.obj.(partial.StatsReporter); ok {
		in := r.Stats()
		s.ReadCalls, s.BytesRead, s.ResidentBytes = in.ReadCalls, in.BytesRead, in.ResidentBytes
	}
	ts := c.TierStats()
	s.Tiers = &ts
	return s
}

// TierStats is the disk cache's share of partial.TierStats (the memory
// fields are the block cache's, zero here).
func (c *Cache) TierStats() partial.TierStats {
	return partial.TierStats{
		DiskHits: c.diskHits.Load(), DiskBytes: c.diskBytes.Load(),
		ColdReads: c.coldReads.Load(), ColdBytes: c.coldBytes.Load(),
		DiskCorrupt: c.corrupt.Load(), DiskWriteErrors: c.writeErrors.Load(),
		DiskUsedBytes: c.d.usage(), DiskBudgetBytes: c.d.budget,
	}
}
