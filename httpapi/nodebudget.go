package httpapi

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// cacheFloor is the smallest a cache shrinks to when the budget is tight.
const cacheFloor = 1 << 20

// usage sums what the served handles count against the budget.
func (r *Registry) usage() (total int64, hs []*handle) {
	total = r.reserved.Load()
	for _, e := range r.all() {
		if h := e.cur.Load(); h != nil {
			total += h.resident.Load()
			hs = append(hs, h)
		}
	}
	return total, hs
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
	used, hs := r.usage()
	if used+need <= r.budget {
		return nil
	}
	cs, give := shrinkable(hs) // if what they can give is not enough, none is shrunk
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
			c.h.resident.Add(-freed)
			used -= freed
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
	used, hs := r.usage()
	free := r.budget - used
	for _, h := range hs {
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
			h.resident.Add(grown)
			free -= grown
		}
	}
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
