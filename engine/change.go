package engine

// Change is what a live mode switch changes in a Spec; zero fields keep
// the Spec's value.
type Change struct {
	Mode       Mode
	Backend    Backend
	CacheBytes int64
	// MemoryBudget switches to (or re-plans) the bounded-memory policy.
	MemoryBudget int64
	// EfSearch sets the index-level efSearch; -1 goes back to the file's.
	EfSearch          int
	Semantics, Kernel string
	// Compression is on_disk's guide level; leaving on_disk drops it.
	Compression string
}

// Apply returns spec changed by c. A new mode drops a backend that
// belongs to the old one (memory is mode full's; mode full names none),
// and a budget is planned for one backend: a new backend or mode full
// without a new budget drops it.
func (c Change) Apply(spec Spec) Spec {
	if c.Mode != "" {
		spec.Mode = c.Mode
		if c.Mode == ModeFull || (c.Backend == "" && spec.Backend == BackendMemory) {
			spec.Backend = ""
		}
	}
	if c.Backend != "" {
		spec.Backend = c.Backend
	}
	if c.CacheBytes != 0 {
		spec.CacheBytes = c.CacheBytes
	}
	if c.MemoryBudget != 0 {
		spec.MemoryBudget = c.MemoryBudget
	}
	if spec.Mode == ModeFull || (c.Backend != "" && c.MemoryBudget == 0) {
		spec.MemoryBudget = 0
	}
	switch {
	case c.EfSearch == -1:
		spec.EfSearch = 0
	case c.EfSearch != 0:
		spec.EfSearch = c.EfSearch
	}
	if c.Semantics != "" {
		spec.Semantics = c.Semantics
	}
	if c.Kernel != "" {
		spec.Kernel = c.Kernel
	}
	if spec.Mode != ModeOnDisk {
		spec.Compression = "" // the old one goes with on_disk; a new one is refused by CheckSpec
	}
	if c.Compression != "" {
		spec.Compression = c.Compression
	}
	return spec
}

// ChangesResults reports whether c applied to from changes answers by
// design (semantics, kernel, efSearch; into, out of or within on_disk,
// whose walk uses approximate distances), so that a switch cannot check
// the new handle by comparing its answers with the old one's.
func (c Change) ChangesResults(from Spec) bool {
	to := c.Apply(from)
	return c.Semantics != "" || c.Kernel != "" || c.EfSearch != 0 ||
		(from.Mode == ModeOnDisk || to.Mode == ModeOnDisk) && (from.Mode != to.Mode || from.Compression != to.Compression)
}
