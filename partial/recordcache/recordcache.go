package recordcache

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/internal/offheap"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// Cache keeps fixed-size records addressed by a dense id (an index's
// vectors by node id) in a fixed amount of memory outside the Go heap.
//
// Unlike the block cache (blockcache), it stores exactly the record's bytes: a 3,136-byte
// vector that straddles two 4 KiB blocks costs 3,136 bytes here instead of
// 8 KiB, and no memory goes to collection headroom. Lookups take no lock:
// each slot carries a version that is odd while the slot is being
// rewritten (a sequence lock), so a reader uses a record in place and then
// checks with Valid that it was not overwritten meanwhile. Insertions take
// one mutex and replace by CLOCK (second chance): a hit sets the slot's
// reference bit, new records enter without it, so records read once leave
// first. A slot's header (version, id, reference bit) sits just before its
// record, so a lookup touches the id table and then the record's own cache
// lines only.
type Cache struct {
	size, stride int
	buf          offheap.Buf
	slotOf       []int32 // id → slot+1, 0 when absent (atomic)
	slots        int
	mu           sync.Mutex
	used, hand   int
	// maxVer is the highest version a slot has had (under mu): a slot
	// given back and then made usable again starts above it, so that no
	// token taken before it was given back is Valid after.
	maxVer    uint32
	inserts   atomic.Int64
	evictions atomic.Int64

	// ahead (nil: none) wakes populateAhead with the slot the first fill
	// has reached; mapMu keeps the mapping and slots in place while it
	// populates (SetBudget and Close hold it beside mu).
	ahead chan int
	mapMu sync.RWMutex
}

// aheadBytes is how far ahead of the first fill populateAhead keeps pages
// backed, and how often (in bytes filled) it is woken.
const aheadBytes = 1 << 20

// slotHeader precedes each record in buf.
type slotHeader struct {
	ver atomic.Uint32 // odd while the slot is rewritten
	id  atomic.Int32  // the record held, −1 when none
	ref atomic.Uint32 // CLOCK reference bit
	_   uint32
}

const headerSize = int(unsafe.Sizeof(slotHeader{}))

func (c *Cache) header(s int) *slotHeader {
	return (*slotHeader)(unsafe.Pointer(&c.buf.B[s*c.stride]))
}

// Stats describes a Cache.
type Stats struct {
	Slots     int   `json:"slots"`      // records it can hold
	Used      int   `json:"used"`       // records held
	Bytes     int64 `json:"bytes"`      // memory it holds (records and slot table)
	Inserts   int64 `json:"inserts"`    // records stored
	Evictions int64 `json:"evictions"`  // records replaced
	Record    int   `json:"record_len"` // bytes per record
}

// New makes a cache for ids in [0, n) of size-byte records within budget
// bytes (records, slot metadata and the id table all count). It fails when
// the budget cannot hold a single record.
func New(n, size int, budget int64) (*Cache, error) {
	if n <= 0 || size <= 0 {
		return nil, fmt.Errorf("%w: record cache of %d records of %d bytes", partial.ErrBadOption, n, size)
	}
	// Cache-line aligned slots, unless that wastes more than 1/32 of a
	// record: memory is what bounds the hit rate, and a 512-byte vector
	// would lose 9% of the slots to alignment.
	stride := (headerSize + size + 63) &^ 63
	if stride-size-headerSize > size/32 {
		stride = (headerSize + size + 15) &^ 15
	}
	slots := (budget - 4*int64(n)) / int64(stride)
	slots = min(slots, int64(n))
	if slots < 1 {
		return nil, fmt.Errorf("%w: a record cache budget of %d bytes cannot hold one %d-byte record for %d ids", partial.ErrBadOption, budget, size, n)
	}
	c := &Cache{size: size, stride: stride, buf: offheap.Alloc(int(slots) * stride),
		slotOf: make([]int32, n), slots: int(slots)}
	if c.buf.Mapped() && int64(slots)*int64(stride) > aheadBytes {
		c.ahead = make(chan int, 1)
		go c.populateAhead(c.ahead)
	}
	return c, nil
}

// populateAhead backs the pages just past the first fill before its stores
// reach them, on a goroutine of its own: a store into a fresh page faults,
// and while the cache first fills those faults would be paid in the
// searches' own time. Populating changes no byte, so it may run beside
// stores. Where the kernel cannot (before Linux 5.14, or without mmap) it
// stops at its first try; stores never wait for it.
func (c *Cache) populateAhead(ahead <-chan int) {
	page := int64(os.Getpagesize())
	for s := range ahead {
		c.mapMu.RLock()
		lo := int64(s) * int64(c.stride) / page * page
		hi := min(lo+2*aheadBytes, int64(c.slots)*int64(c.stride)) / page * page
		ok := lo >= hi || c.buf.B == nil || // a wake-up still queued when Close freed the buffer finds nil
			offheap.Populate(c.buf.B[lo:hi])
		c.mapMu.RUnlock()
		if !ok {
			return
		}
	}
}

// Get returns record id's bytes in place and a token for Valid, or ok false
// when the record is not cached. The bytes may be overwritten at any time:
// use them, then call Valid(token); if it reports false, discard whatever was
// computed from them.
func (c *Cache) Get(id int32) (rec []byte, token uint64, ok bool) {
	s := atomic.LoadInt32(&c.slotOf[id]) - 1
	if s < 0 {
		return nil, 0, false
	}
	m := c.header(int(s))
	v := m.ver.Load()
	// A stored record's version is even and at least 2; 0 is a slot given
	// back to the system (SetBudget), whose header reads as zeros.
	if v&1 != 0 || v == 0 || m.id.Load() != id {
		return nil, 0, false
	}
	if m.ref.Load() == 0 {
		m.ref.Store(1)
	}
	off := int(s)*c.stride + headerSize
	return c.buf.B[off : off+c.size : off+c.size], uint64(s)<<32 | uint64(v), true
}

// Valid reports whether the bytes Get returned with token were not
// overwritten since.
func (c *Cache) Valid(token uint64) bool {
	return c.header(int(token>>32)).ver.Load() == uint32(token)
}

// Copy copies record id into dst (len ≥ the record size) and reports whether
// it was cached and intact.
func (c *Cache) Copy(dst []byte, id int32) bool {
	rec, tok, ok := c.Get(id)
	if !ok {
		return false
	}
	copy(dst, rec)
	return c.Valid(tok)
}

// Put stores record id (len(rec) = the record size), replacing the least
// recently referenced record once the cache is full. Storing an id already
// cached does nothing.
func (c *Cache) Put(id int32, rec []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if atomic.LoadInt32(&c.slotOf[id]) != 0 {
		return
	}
	var s int
	fresh := c.used < c.slots
	if fresh {
		s = c.used
		c.used++
		if c.ahead != nil && s*c.stride/aheadBytes != (s+1)*c.stride/aheadBytes {
			select { // the fill entered another aheadBytes
			case c.ahead <- s + 1:
			default:
			}
		}
	} else {
		for { // ends within two turns: each pass clears the bits it skips
			m := c.header(c.hand)
			s = c.hand
			if c.hand++; c.hand == c.slots {
				c.hand = 0
			}
			if m.ref.Load() == 0 {
				break
			}
			m.ref.Store(0)
		}
		c.evictions.Add(1)
	}
	m := c.header(s)
	m.ver.Add(1) // odd: readers of the old record see it change
	if !fresh {
		atomic.StoreInt32(&c.slotOf[m.id.Load()], 0)
	}
	m.id.Store(id)
	off := s*c.stride + headerSize
	copy(c.buf.B[off:off+c.size], rec)
	m.ref.Store(0)
	c.maxVer = max(c.maxVer, m.ver.Add(1))
	atomic.StoreInt32(&c.slotOf[id], int32(s)+1)
	c.inserts.Add(1)
}

// Budget is the memory the cache may hold: its slots and the id table
// (Bytes, as SetBudget leaves it).
func (c *Cache) Budget() int64 { return c.Bytes() }

// SetBudget resizes the cache to what budget bytes hold (slots and the id
// table), between one slot and the slots it was made with. Shrinking
// drops the records in the slots given up and gives their pages back to
// the system; a reader holding bytes of a dropped record sees Valid fail.
// Growing makes slots given up before usable again: their pages come back
// as records fill them.
func (c *Cache) SetBudget(budget int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf.B == nil { // closed: a server may resize an index's caches as it closes
		return
	}
	made := len(c.buf.B) / c.stride
	slots := int(min(max((budget-c.bytes(0))/int64(c.stride), 1), int64(made)))
	c.mapMu.Lock() // populateAhead stays within the slots kept
	defer c.mapMu.Unlock()
	if slots >= c.slots {
		// c.used stays: the slots past it fill as records come. Their
		// headers read as zeros where the pages went back: a version
		// above every one issued keeps old tokens invalid.
		c.maxVer += 2
		for s := c.slots; s < slots; s++ {
			m := c.header(s)
			m.id.Store(-1)
			m.ver.Store(c.maxVer)
		}
		c.slots = slots
		return
	}
	for s := slots; s < c.used; s++ {
		m := c.header(s)
		m.ver.Add(1)
		atomic.StoreInt32(&c.slotOf[m.id.Load()], 0)
		m.id.Store(-1)
		c.maxVer = max(c.maxVer, m.ver.Add(1))
	}
	// The whole pages past the slots kept: their headers then read as
	// zeros, which Get never takes for a record.
	page := os.Getpagesize()
	lo := (slots*c.stride + page - 1) / page * page
	if hi := c.slots * c.stride / page * page; lo < hi && c.buf.Mapped() {
		_ = offheap.Discard(c.buf.B[lo:hi])
	}
	c.slots, c.used = slots, min(c.used, slots)
	if c.hand >= slots {
		c.hand = 0
	}
}

// Contains reports whether record id is cached.
func (c *Cache) Contains(id int32) bool { return atomic.LoadInt32(&c.slotOf[id]) != 0 }

// Stats describes the cache.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	used, slots := c.used, c.slots
	c.mu.Unlock()
	return Stats{Slots: slots, Used: used, Bytes: c.bytes(slots),
		Inserts: c.inserts.Load(), Evictions: c.evictions.Load(), Record: c.size}
}

// Bytes is the memory the cache holds: slots (headers and records) and the
// id table.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes(c.slots)
}

// bytes is what the cache holds with slots slots: them and the id table.
func (c *Cache) bytes(slots int) int64 { return int64(slots)*int64(c.stride) + 4*int64(len(c.slotOf)) }

// Close frees the records. No Get, Put or use of returned bytes may follow.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ahead != nil {
		close(c.ahead)
		c.ahead = nil
	}
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	return c.buf.Free()
}
