package httpapi

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// cacheFloor is the smallest a cache shrinks to when the budget is tight.
const cacheFloor = 1 << 20

// usage is what the served handles and the opens under way count against
// the budget (used), and the served handles.
func (r *Registry) usage() (total int64, hs []*handle) { return r.used(), r.serving() }

// used is what the served handles and the opens under way count against
// the budget.
func (r *Registry) used() int64 { return r.reserved.Load() + r.held.Load() }

// serving lists the handles that serve.
func (r *Registry) serving() []*handle {
	var hs []*handle
	for _, e := range r.all() {
		if h := e.cur.Load(); h != nil {
			hs = append(hs, h)
		}
	}
	return hs
}

// serve makes h the handle e serves (nil: none), its resident bytes
// counted in held in place of those of the handle it replaces, which it
// returns. It serves no handle in an entry deleted meanwhile (ok false):
// a Delete that ran while h opened found nothing to retire.
func (r *Registry) serve(e *entry, h *handle) (old *handle, ok bool) {
	r.memMu.Lock()
	defer r.memMu.Unlock()
	if h != nil && e.deleted.Load() {
		return nil, false
	}
	if h != nil {
		h.counted = true
		r.held.Add(h.resident.Load())
	}
	if old = e.cur.Swap(h); old != nil {
		old.counted = false
		r.held.Add(-old.resident.Load())
	}
	r.gen.Add(1)
	return old, true
}

// addResidentLocked changes h's resident bytes by n, and held with them
// while h serves (r.memMu held).
func (r *Registry) addResidentLocked(h *handle, n int64) {
	h.resident.Add(n)
	if h.counted {
		r.held.Add(n)
	}
}

// admit makes room for need bytes: caches of other indexes (block and
// vector caches) shrink, largest first, down to cacheFloor, when that makes
// enough room; else a 429 with the numbers, nothing shrunk (a load refused
// must not cost the others their caches). During a switch
// the handle being replaced still counts (both are open for a moment).
func (r *Registry) admit(need, beside int64) error {
	if r.budget <= 0 {
		return nil
	}
	// What could never fit is a 400: retrying is no use.
	if need > r.budget {
		return errBadRequest("memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: the index needs %d bytes, more than the node's whole budget of %d (ask for less, or raise the server's memory_budget)", need, r.budget))
	}
	if need+beside > r.budget {
		return errBadRequest("memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: the new mode needs %d bytes beside the %d the current one holds until the switch ends, more than the node's whole budget of %d (DELETE the index and load it in the new mode, or ask for less)", need, beside, r.budget))
	}
	used := r.used()
	if used+need <= r.budget {
		return nil
	}
	cs, give := shrinkable(r.serving()) // if what they can give is not enough, none is shrunk
	if used+need-give > r.budget {
		return errTooMany("memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: need %d bytes, %d of %d in use by loaded indexes, and their caches could give back only %d (down to %d bytes each)",
			need, used, r.budget, give, cacheFloor))
	}
	slices.SortFunc(cs, func(a, b heldCache) int { return cmp.Compare(b.b, a.b) })
	for _, c := range cs {
		if used+need <= r.budget {
			break
		}
		if target := max(cacheFloor, c.b-(used+need-r.budget)); target < c.b {
			c.c.SetBudget(target)
			freed := c.b - c.c.Budget()
			r.addResidentLocked(c.h, -freed)
			used -= freed
			r.shrunk = true
		}
	}
	if used+need > r.budget {
		return errTooMany("memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: need %d bytes, %d of %d in use by loaded indexes (caches already shrunk to %d bytes where possible)",
			need, used, r.budget, cacheFloor))
	}
	return nil
}

// regrow gives the node's free memory (what no index holds or has
// reserved) back to caches admit shrank, each up to its size at open, once
// a load, switch or delete has ended: a cache shrunk for an index that is
// deleted, or for a load that failed, no longer stays small for good.
func (r *Registry) regrow() {
	if r.budget <= 0 {
		return
	}
	r.memMu.Lock()
	defer r.memMu.Unlock()
	if !r.shrunk { // no cache is below its size at open: nothing to walk
		return
	}
	free := r.budget - r.used()
	left := false // a cache still below its size at open
	for _, h := range r.serving() {
		for i, c := range h.caches() {
			if free <= 0 {
				return
			}
			b := c.Budget()
			if i >= len(h.planned) || b >= h.planned[i] {
				continue
			}
			c.SetBudget(min(h.planned[i], b+free))
			grown := c.Budget() - b
			r.addResidentLocked(h, grown)
			free -= grown
			left = left || c.Budget() < h.planned[i]
		}
	}
	r.shrunk = left
}

// room is what a load may take of the node's budget: what no index holds
// or has reserved, and what admit would take from caches down to
// cacheFloor.
func (r *Registry) room() int64 {
	used, hs := r.usage()
	_, give := shrinkable(hs)
	return r.budget - used + give
}

// heldCache is one of a handle's caches and its budget when looked at.
type heldCache struct {
	h *handle
	c engine.Resizable
	b int64
}

// shrinkable lists the caches of hs and what they would give back down to
// cacheFloor each.
func shrinkable(hs []*handle) (cs []heldCache, give int64) {
	for _, h := range hs {
		for _, c := range h.caches() {
			b := c.Budget()
			cs = append(cs, heldCache{h, c, b})
			give += max(b-cacheFloor, 0)
		}
	}
	return cs, give
}
