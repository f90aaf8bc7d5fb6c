package partial

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
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
	c, err := NewRecordCache(50, size, 4*50+3*128) // room for 3 records
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st := c.Stats(); st.Slots != 3 || c.stride != 128 {
		t.Fatalf("slots %d stride %d, want 3 and 128 (16-byte header, 64-byte alignment)", st.Slots, c.stride)
	}
	for id := int32(0); id < 3; id++ {
		c.Put(id, record(id, size))
	}
	// Referencing 0 and 2 leaves 1 as the CLOCK victim.
	for _, id := range []int32{0, 2} {
		rec, tok, ok := c.Get(id)
		if !ok || !bytes.Equal(rec, record(id, size)) || !c.Valid(tok) {
			t.Fatalf("record %d: ok %v, valid %v", id, ok, c.Valid(tok))
		}
	}
	c.Put(10, record(10, size))
	if c.Contains(1) || !c.Contains(0) || !c.Contains(2) || !c.Contains(10) {
		t.Fatal("CLOCK should have replaced record 1, the one not referenced")
	}
	c.Put(10, record(99, size)) // already cached: kept as it was
	dst := make([]byte, size)
	if !c.Copy(dst, 10) || !bytes.Equal(dst, record(10, size)) {
		t.Fatal("record 10 changed by a second Put")
	}
	if _, _, ok := c.Get(1); ok {
		t.Fatal("Get of an evicted record succeeded")
	}
	want := RecordCacheStats{Slots: 3, Used: 3, Bytes: 3*128 + 4*50, Inserts: 4, Evictions: 1, Record: size}
	if st := c.Stats(); st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}

func TestRecordCacheBudget(t *testing.T) {
	if _, err := NewRecordCache(1000, 3136, 4000); !errors.Is(err, ErrBadOption) {
		t.Fatalf("budget below one record: %v, want ErrBadOption", err)
	}
	c, err := NewRecordCache(10, 64, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s := c.Stats().Slots; s != 10 {
		t.Fatalf("%d slots for 10 ids", s)
	}
}

// TestRecordCacheConcurrent: readers racing writers never accept bytes of a
// record other than the one they asked for.
func TestRecordCacheConcurrent(t *testing.T) {
	const n, size = 64, 200
	c, err := NewRecordCache(n, size, 4*n+8*(size+16+64))
	if err != nil {
		t.Fatal(err)
	}
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
					t.Errorf("record %d: accepted bytes of another record", id)
					return
				}
			}
		}(r)
	}
	readers.Wait()
	stop.Store(true)
	wg.Wait()
	if accepted.Load() == 0 {
		t.Fatal("no read was accepted")
	}
	t.Logf("accepted %d, rejected %d (overwritten while read)", accepted.Load(), rejected.Load())
}
