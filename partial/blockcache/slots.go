package blockcache

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/internal/offheap"
)

// slots keeps a Cached file's blocks off the Go heap in fixed slots of the
// block size, recycled: the home for a cache smaller than its file, which
// evicts all the time. On the Go heap those blocks would make the
// collector scan and free a block per miss and double their memory with
// its headroom (under GOMEMLIMIT it would run without pause); a mirror
// would pay a page fault and an madvise per block. An evicted block's slot
// is reused only after a grace period of the read sections (the mirror's
// scheme).
type slots struct {
	sections
	bs     int64
	budget *atomic.Int64 // the cache's budget: slots beyond twice it and four chunks are not made

	mu           sync.Mutex
	chunks       []offheap.Buf // slotsPerChunk slots each
	free         []int32       // slot numbers ready for reuse
	pending      []evictedSlot // freed, waiting for their grace period
	running      bool          // a reclaim goroutine is on
	dead         bool          // released (Close)
	pendingBytes atomic.Int64  // pending slots' bytes
}

type evictedSlot struct {
	slot  int32
	epoch uint64
}

const slotsPerChunk = 256

func newSlots(bs int64, budget *atomic.Int64) *slots { return &slots{bs: bs, budget: budget} }

// at is slot i's bytes.
func (s *slots) at(i int32) []byte {
	b := s.chunks[i/slotsPerChunk].B
	off := int64(i%slotsPerChunk) * s.bs
	return b[off : off+s.bs : off+s.bs]
}

// store copies a block into a free slot and returns its bytes there and
// the slot's number; nil once released or when no slot is to be had
// (take).
func (s *slots) store(_ int64, buf []byte) ([]byte, int32) {
	dst, i := s.take()
	if dst == nil {
		return nil, 0
	}
	dst = dst[:len(buf)]
	copy(dst, buf) // the slot is this block's alone until it is evicted
	return dst, i
}

// untake returns a slot that take handed out and nobody has seen.
func (s *slots) untake(i int32) {
	s.mu.Lock()
	if !s.dead {
		s.free = append(s.free, i)
	}
	s.mu.Unlock()
}

// take hands out a free slot (all bs bytes) for a block to be read into;
// nil once released, or when none is free and twice the budget (and four
// chunks) is made.
func (s *slots) take() ([]byte, int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil, 0
	}
	if len(s.free) == 0 {
		// Evicted slots wait for every read section open when they left
		// (searches that may still view them): when searches are long (an
		// object store's round trips) and overlap, that wait never ends,
		// and allocating on would grow without bound. Slots stop at twice
		// the budget and four chunks (what evictions pending a grace
		// period take when fast searches churn a small cache); past that
		// the caller reads into a heap buffer, left to the collector, and
		// the block is not cached.
		chunk := slotsPerChunk * s.bs
		if made := int64(len(s.chunks)) * chunk; made+chunk > 2*s.budget.Load()+4*chunk {
			return nil, 0
		}
		c := offheap.Alloc(slotsPerChunk * int(s.bs))
		base := int32(len(s.chunks) * slotsPerChunk)
		s.chunks = append(s.chunks, c)
		for i := int32(slotsPerChunk - 1); i >= 0; i-- {
			s.free = append(s.free, base+i)
		}
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return s.at(i), i
}

// evicted returns a block's slot for reuse once the sections open now have
// ended. The caller has already taken the block out of the hit table.
func (s *slots) evicted(_ int64, slot int32) {
	s.mu.Lock()
	s.pending = append(s.pending, evictedSlot{slot, s.epoch.Load()})
	s.pendingBytes.Add(s.bs)
	if !s.running && !s.dead {
		s.running = true
		go s.reclaim()
	}
	s.mu.Unlock()
}

// reclaim moves pending slots to the free list, a grace period at a time,
// until none is pending.
func (s *slots) reclaim() {
	for {
		time.Sleep(reclaimPause)
		s.mu.Lock()
		if len(s.pending) == 0 || s.dead {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		e := s.flip()
		s.mu.Lock()
		kept := s.pending[:0]
		for _, p := range s.pending {
			if p.epoch <= e {
				s.free = append(s.free, p.slot)
				s.pendingBytes.Add(-s.bs)
			} else {
				kept = append(kept, p)
			}
		}
		s.pending = kept
		s.mu.Unlock()
	}
}

// release frees every slot once the open sections have ended. The caller
// has made new sections see the file closed.
func (s *slots) release() error {
	s.drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
	var first error
	for i := range s.chunks {
		if err := s.chunks[i].Free(); err != nil && first == nil {
			first = err
		}
	}
	s.chunks, s.free, s.pending = nil, nil, nil
	s.pendingBytes.Store(0)
	return first
}

// heldBytes is the memory the slots take (cached, pending and free).
func (s *slots) heldBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.chunks)) * slotsPerChunk * s.bs
}
