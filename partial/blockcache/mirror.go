package blockcache

import (
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/internal/offheap"
)

// mirror keeps a Cached file's blocks at their file offsets in one reserved
// anonymous mapping of the file's size: pages take memory only while their
// block is cached. A range across cached blocks is then one contiguous view
// — no copy for a vector or a list that crosses a block boundary — laid out
// as in a mapping of the file.
//
// The garbage collector does not keep evicted bytes alive, so readers
// work inside read sections (enter/exit) and an evicted block's pages are
// discarded only once every section that could have seen the block has
// ended: a grace period over two reader counters indexed by an epoch's
// parity (the scheme of RCU). A reclaim goroutine runs while blocks are
// pending. Blocks are written in only under mapMu's read lock and discarded
// only under its write lock, and a block cached again before its discard
// leaves the pending set, so a discard never hits a cached block.
type mirror struct {
	mem offheap.Buf // block k at [k·bs, (k+1)·bs); file offset f at pad+f
	g   grid

	sections

	mapMu sync.RWMutex // read: storing blocks; write: discarding, unmapping
	dead  bool         // unmapped (under mapMu)

	mu           sync.Mutex       // guards pending and running
	pending      map[int64]uint64 // evicted block → the epoch it was evicted in
	running      bool             // a reclaim goroutine is on
	pendingBytes atomic.Int64     // evicted, not yet discarded
}

// reclaimPause lets evictions gather between grace periods, so one batch
// of discards (adjacent blocks coalesced) serves many.
const reclaimPause = time.Millisecond

// newMirror reserves the mapping for a file's blocks laid out by g, or
// returns nil where it cannot: blocks smaller than a page (a discard works
// on whole pages) or no anonymous mappings. huge asks for 2 MiB pages, for
// a cache that will hold the whole file.
func newMirror(g grid, huge bool) *mirror {
	if g.bs%int64(os.Getpagesize()) != 0 || g.size <= 0 || g.count() > math.MaxInt/g.bs {
		return nil
	}
	mem, ok := offheap.Reserve(int(g.count()*g.bs), huge)
	if !ok {
		return nil
	}
	return &mirror{mem: mem, g: g, pending: map[int64]uint64{}}
}

// sections are read sections with grace periods (the scheme of RCU): a
// reader's views stay valid from enter to exit, and memory a writer took
// out of sight is reused or given back only after a grace period (flip)
// has seen every section that could have seen it end.
type sections struct {
	epoch   atomic.Uint64
	readers [2]atomic.Int64 // open sections by the parity of their epoch
}

// enter opens a read section; exit closes it with the token enter returned.
func (s *sections) enter() uint64 {
	for {
		e := s.epoch.Load()
		s.readers[e&1].Add(1)
		if s.epoch.Load() == e {
			return e
		}
		s.readers[e&1].Add(-1) // a grace period began: count in the new epoch
	}
}

func (s *sections) exit(e uint64) { s.readers[e&1].Add(-1) }

// flip ends epoch e (returned) and waits for its sections: those of
// earlier epochs were waited for by earlier flips, so no section that
// began at e or before remains, and whatever was taken out of sight at e
// or before is unseen. One flip at a time.
func (s *sections) flip() uint64 {
	e := s.epoch.Add(1) - 1
	for s.readers[e&1].Load() != 0 {
		time.Sleep(50 * time.Microsecond)
	}
	return e
}

// drain waits until no section is open (Close: new sections see the
// backend closed and view nothing).
func (s *sections) drain() {
	for s.readers[0].Load()+s.readers[1].Load() != 0 {
		time.Sleep(50 * time.Microsecond)
	}
}

// blockLen is block blk's length (the first and last may be shorter).
func (m *mirror) blockLen(blk int64) int64 {
	start, end := m.g.span(blk)
	return end - start
}

// store writes block blk's bytes into place and returns them there; nil
// once the mirror is unmapped. The caller holds the block's shard lock.
// Rewriting a block that sections may still view (evicted, not yet
// discarded) is harmless: the file's bytes do not change (if the file did
// change, the bytes read came after its mtime moved, and the per-query
// check, FileChecker.CheckFD, fails every query that could have seen them).
func (m *mirror) store(blk int64, buf []byte) ([]byte, int32) {
	m.mapMu.RLock()
	defer m.mapMu.RUnlock()
	if m.dead {
		return nil, 0
	}
	start, _ := m.g.span(blk)
	at := m.g.pad + start
	dst := m.mem.B[at : at+int64(len(buf)) : at+int64(len(buf))]
	copy(dst, buf)
	m.mu.Lock()
	if _, ok := m.pending[blk]; ok {
		delete(m.pending, blk)
		m.pendingBytes.Add(-m.blockLen(blk))
	}
	m.mu.Unlock()
	return dst, 0
}

// evicted queues block blk for discarding once the sections open now have
// ended. The caller has already taken it out of the hit table.
func (m *mirror) evicted(blk int64, _ int32) {
	m.mu.Lock()
	if _, ok := m.pending[blk]; !ok {
		m.pendingBytes.Add(m.blockLen(blk))
	}
	m.pending[blk] = m.epoch.Load()
	if !m.running {
		m.running = true
		go m.reclaim()
	}
	m.mu.Unlock()
}

// reclaim discards pending blocks, a grace period at a time, until none is
// left.
func (m *mirror) reclaim() {
	var free []int64
	for {
		time.Sleep(reclaimPause)
		m.mu.Lock()
		if len(m.pending) == 0 {
			m.running = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		e := m.flip() // every block evicted at e or before is out of sight
		m.mapMu.Lock()
		m.mu.Lock()
		free = free[:0]
		for blk, at := range m.pending {
			if at <= e {
				free = append(free, blk)
				delete(m.pending, blk)
			}
		}
		if m.dead {
			clear(m.pending)
			m.running = false
			m.mu.Unlock()
			m.mapMu.Unlock()
			return
		}
		m.mu.Unlock()
		slices.Sort(free)
		var n int64
		for i := 0; i < len(free); {
			j := i + 1
			for j < len(free) && free[j] == free[j-1]+1 {
				j++
			}
			lo, hi := free[i]*m.g.bs, (free[j-1]+1)*m.g.bs
			_ = offheap.Discard(m.mem.B[lo:hi]) // fails only on a bad range
			for _, blk := range free[i:j] {
				n += m.blockLen(blk)
			}
			i = j
		}
		m.pendingBytes.Add(-n)
		m.mapMu.Unlock()
	}
}

// release unmaps the mirror once every open section has ended. The
// caller has made new sections see the file closed (they view nothing).
func (m *mirror) release() error {
	m.drain()
	m.mapMu.Lock()
	defer m.mapMu.Unlock()
	m.dead = true
	m.pendingBytes.Store(0)
	return m.mem.Free()
}
