package httpapi

import (
	"sync"
	"sync/atomic"
)

// cowMap maps names to values for readers on every request and rare
// writers: a lookup takes no lock and writes nothing shared (sync.Map), a
// write costs what one key costs, and all() is a read-only copy made on
// its first call after a write and never changed (copying the whole map on
// every write made loading n indexes cost n² copies).
type cowMap[V any] struct {
	mu   sync.Mutex // serialises writes and the copy all() makes
	m    sync.Map   // string → V
	snap atomic.Pointer[map[string]V]
}

// load returns key's value.
func (c *cowMap[V]) load(key string) (v V, ok bool) {
	if x, ok := c.m.Load(key); ok {
		return x.(V), true
	}
	return v, false
}

// get returns key's value, made by mk on first use.
func (c *cowMap[V]) get(key string, mk func() V) V {
	if v, ok := c.load(key); ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.load(key); ok {
		return v
	}
	v := mk()
	c.m.Store(key, v)
	c.snap.Store(nil)
	return v
}

// store sets key's value.
func (c *cowMap[V]) store(key string, v V) {
	c.mu.Lock()
	c.m.Store(key, v)
	c.snap.Store(nil)
	c.mu.Unlock()
}

// remove drops key.
func (c *cowMap[V]) remove(key string) {
	c.mu.Lock()
	if _, ok := c.m.LoadAndDelete(key); ok {
		c.snap.Store(nil)
	}
	c.mu.Unlock()
}

// all is the current map (read-only; empty before the first write).
func (c *cowMap[V]) all() map[string]V {
	if m := c.snap.Load(); m != nil {
		return *m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.snap.Load(); m != nil {
		return *m
	}
	m := map[string]V{}
	c.m.Range(func(k, v any) bool {
		m[k.(string)] = v.(V)
		return true
	})
	c.snap.Store(&m)
	return m
}
