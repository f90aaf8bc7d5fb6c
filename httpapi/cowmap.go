package httpapi

import (
	"maps"
	"sync"
	"sync/atomic"
)

// cowMap is a copy-on-write map for a small, rarely growing key set: reads
// are an atomic load and a map lookup, writes nothing shared.
type cowMap[V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string]V]
}

// get returns key's value, made by mk on first use.
func (c *cowMap[V]) get(key string, mk func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[key]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[key]; ok {
			return v
		}
	}
	n := make(map[string]V)
	if old != nil {
		maps.Copy(n, *old)
	}
	v := mk()
	n[key] = v
	c.m.Store(&n)
	return v
}

// remove drops key.
func (c *cowMap[V]) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old == nil {
		return
	}
	if _, ok := (*old)[key]; !ok {
		return
	}
	n := maps.Clone(*old)
	delete(n, key)
	c.m.Store(&n)
}

// all is the current map (read-only; nil before the first get).
func (c *cowMap[V]) all() map[string]V {
	if m := c.m.Load(); m != nil {
		return *m
	}
	return nil
}
