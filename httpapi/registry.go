package httpapi

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// cacheFloor is the smallest a cache shrinks to when the budget is tight.
const cacheFloor = 1 << 20

// entry is one named index: the handle serving it and its statistics.
type entry struct {
	name    string
	cur     atomic.Pointer[handle]
	mu      sync.Mutex // one load, switch or delete at a time
	stats   queryStats
	state   atomic.Value // string: "serving", "switching", …
	lastErr atomic.Value // string: why the last switch failed
}

// Registry holds the served indexes and the node-wide memory budget.
type Registry struct {
	roots  []string // data roots, symlinks resolved
	budget int64    // bytes; 0 = unlimited

	// entries is never changed in place: a load or delete stores a changed
	// copy (under mu), so a lookup is one atomic load with no lock (a read
	// lock writes a counter every core shares, on every request).
	mu      sync.Mutex
	entries atomic.Pointer[map[string]*entry]
	memMu   sync.Mutex // serialises budget checks with the opens they admit
}

// NewRegistry serves indexes from files under roots within budget bytes.
func NewRegistry(roots []string, budget int64) (*Registry, error) {
	r := &Registry{budget: budget}
	r.entries.Store(&map[string]*entry{})
	for _, root := range roots {
		abs, err := filepath.Abs(root)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("data root %s: %w", root, err)
		}
		r.roots = append(r.roots, abs)
	}
	if len(r.roots) == 0 {
		return nil, fmt.Errorf("at least one data root is needed")
	}
	return r, nil
}

// resolve maps a request path (relative to the first data root, or
// absolute) to a file that lies, after symlinks, inside a data root.
func (r *Registry) resolve(p string) (string, error) {
	if p == "" {
		return "", badRequest("path is required")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.roots[0], p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if os.IsNotExist(err) {
			return "", &apiError{404, "file_not_found", fmt.Sprintf("no file at %s", p)}
		}
		return "", &apiError{403, "forbidden_path", fmt.Sprintf("cannot resolve %s", p)}
	}
	for _, root := range r.roots {
		if rel, err := filepath.Rel(root, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return real, nil
		}
	}
	return "", &apiError{403, "forbidden_path", fmt.Sprintf("%s is outside the data roots", p)}
}

func (r *Registry) get(name string) *entry {
	return r.all()[name]
}

// all is the served indexes by name; read-only.
func (r *Registry) all() map[string]*entry { return *r.entries.Load() }

// setLocked serves e under name, or stops serving name when e is nil (r.mu
// held).
func (r *Registry) setLocked(name string, e *entry) {
	m := maps.Clone(r.all())
	if e == nil {
		delete(m, name)
	} else {
		m[name] = e
	}
	r.entries.Store(&m)
}

// acquire returns the handle serving name with a lease on it.
func (r *Registry) acquire(name string) (*entry, lease, error) {
	e := r.get(name)
	if e == nil {
		return nil, lease{}, notFound(name)
	}
	for {
		h := e.cur.Load()
		if h == nil {
			return nil, lease{}, notFound(name)
		}
		if l, ok := h.acquire(); ok {
			return e, l, nil
		}
	}
}

// usage sums what the served handles count against the budget.
func (r *Registry) usage() (total int64, hs []*handle) {
	for _, e := range r.all() {
		if h := e.cur.Load(); h != nil {
			total += h.resident.Load()
			hs = append(hs, h)
		}
	}
	return total, hs
}

// admit makes room for need bytes: caches of other indexes shrink (largest
// first, down to cacheFloor) before a 429 with the numbers. During a switch
// the handle being replaced still counts (both are open for a moment).
func (r *Registry) admit(need int64) error {
	if r.budget <= 0 {
		return nil
	}
	used, hs := r.usage()
	if used+need <= r.budget {
		return nil
	}
	slices.SortFunc(hs, func(a, b *handle) int { return cmpInt(cacheBudget(b), cacheBudget(a)) })
	for _, h := range hs {
		c := h.cache()
		if c == nil || used+need <= r.budget {
			continue
		}
		cur := c.Budget()
		target := max(cacheFloor, cur-(used+need-r.budget))
		if target < cur {
			c.SetBudget(target)
			h.resident.Add(-(cur - target))
			used -= cur - target
		}
	}
	if used+need > r.budget {
		return &apiError{429, "memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: need %d bytes, %d of %d in use by loaded indexes (caches already shrunk to %d bytes where possible)",
			need, used, r.budget, cacheFloor)}
	}
	return nil
}

func cacheBudget(h *handle) int64 {
	if c := h.cache(); c != nil {
		return c.Budget()
	}
	return 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// open builds a handle for spec (normalised) within the budget.
func (r *Registry) open(spec LoadSpec) (*handle, error) {
	if spec.Mode == "" {
		spec.Mode = "memory_efficient"
	}
	path, err := r.resolve(spec.Path)
	if err != nil {
		return nil, err
	}
	backend, err := partial.ModeBackend(spec.Mode, spec.Backend, path)
	if err != nil {
		return nil, err
	}
	if spec.MemoryBudget > 0 && spec.Backend == "" && backend != "zstd" {
		backend = "direct" // the policy reads misses in batches with direct I/O
	}
	spec.Backend = backend
	sem, err := hnswsearch.ParseSemantics(spec.Semantics)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	ker, err := hnswsearch.ParseKernel(spec.Kernel)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	if spec.CacheBytes < 0 || spec.MemoryBudget < 0 {
		return nil, badRequest("cache_bytes and memory_budget must not be negative")
	}
	if spec.MemoryBudget > 0 && spec.Mode != "memory_efficient" {
		return nil, badRequest("memory_budget applies to mode memory_efficient, not %q", spec.Mode)
	}
	// Parse once to learn the resident size before committing memory (the
	// parse reads only headers and small arrays).
	pf, err := hnswsearch.Probe(path, backend)
	if err != nil {
		return nil, err
	}
	opts := hnswsearch.Options{Semantics: sem, Kernel: ker}
	cacheBytes := partial.Options{CacheBytes: spec.CacheBytes}.CacheBudgetFor(backend, pf.Size)
	need := pf.ResidentBytes() + cacheBytes
	if backend == "memory" {
		need += pf.Size
	}
	if spec.MemoryBudget > 0 {
		plan, err := hnswsearch.PlanBudget(pf, backend, spec.MemoryBudget, runtime.GOMAXPROCS(0))
		if err != nil {
			return nil, badRequest("%s: %v", spec.Path, err)
		}
		plan.Apply(&opts)
		cacheBytes, need = plan.BlockCacheBytes, spec.MemoryBudget
	}
	r.memMu.Lock()
	defer r.memMu.Unlock()
	if err := r.admit(need); err != nil {
		return nil, err
	}
	st, err := partial.Open(path, partial.Options{Backend: backend, CacheBytes: cacheBytes, AlignOffset: hnswsearch.AlignOffset(pf)})
	if err != nil {
		return nil, err
	}
	h := &handle{spec: spec, path: path, st: st}
	h.resident.Store(need)
	if h.file, err = faissfmt.Open(st, st.Size()); err == nil {
		h.idx, err = hnswsearch.New(h.file, st, opts)
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("%s: %w", spec.Path, err)
	}
	h.space = spec.SpaceType
	if h.space == "" {
		h.space = defaultSpace(h.idx)
	}
	if err := checkSpace(h.space, h.idx); err != nil {
		h.idx.Close()
		st.Close()
		return nil, err
	}
	if rs := spec.Rerank; rs != nil {
		if err := h.openRerank(r, rs); err != nil {
			h.idx.Close()
			st.Close()
			return nil, err
		}
	}
	return h, nil
}

func (h *handle) openRerank(r *Registry, rs *RerankSpec) error {
	if rs.Strategy == "" {
		rs.Strategy = "direct"
	}
	if !slices.Contains(rerank.Strategies, rs.Strategy) {
		return badRequest("unknown rerank strategy %q (known: %s)", rs.Strategy, strings.Join(rerank.Strategies, ", "))
	}
	if rs.OversampleFactor < 0 {
		return badRequest("rerank.oversample_factor must be positive")
	}
	p, err := r.resolve(rs.VectorsPath)
	if err != nil {
		return err
	}
	s, err := rerank.Open(p, rs.Strategy)
	if err != nil {
		return err
	}
	if h.idx.Binary() {
		err = nil
		if s.Count != h.idx.NTotal() {
			err = fmt.Errorf("%w: %s holds %d vectors, the index has %d", rerank.ErrVectors, rs.VectorsPath, s.Count, h.idx.NTotal())
		}
	} else {
		err = s.Check(h.idx.Dim(), h.idx.NTotal())
	}
	if err != nil {
		s.Close()
		return err
	}
	h.rer, h.rerPath = s, p
	return nil
}

// Load serves spec under name; a name already served is a 409.
func (r *Registry) Load(name string, spec LoadSpec) error {
	if name == "" || strings.ContainsAny(name, "/ ") || strings.HasPrefix(name, "_") {
		return badRequest("invalid index name %q", name)
	}
	r.mu.Lock()
	if _, ok := r.all()[name]; ok {
		r.mu.Unlock()
		return &apiError{409, "index_exists", fmt.Sprintf("index %q is loaded; switch it with PUT /indexes/%s/_mode or DELETE it first", name, name)}
	}
	e := &entry{name: name}
	e.state.Store("loading")
	e.mu.Lock()
	r.setLocked(name, e)
	r.mu.Unlock()
	defer e.mu.Unlock()
	h, err := r.open(spec)
	if err != nil {
		r.mu.Lock()
		r.setLocked(name, nil)
		r.mu.Unlock()
		return err
	}
	e.cur.Store(h)
	e.state.Store("serving")
	return nil
}

// Delete stops serving name and waits (up to wait) for its in-flight
// queries before the handle closes.
func (r *Registry) Delete(name string, wait time.Duration) error {
	r.mu.Lock()
	e, ok := r.all()[name]
	if ok {
		r.setLocked(name, nil)
	}
	r.mu.Unlock()
	if !ok {
		return notFound(name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if h := e.cur.Swap(nil); h != nil {
		h.retire()
		deadline := time.Now().Add(wait)
		for h.users.count() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// SwitchSpec is the body of PUT /indexes/{name}/_mode: fields left empty
// keep their current value.
type SwitchSpec struct {
	Mode       string `json:"mode"`
	Backend    string `json:"backend"`
	CacheBytes int64  `json:"cache_bytes"`
	// MemoryBudget switches to (or re-plans) the bounded-memory policy.
	MemoryBudget int64  `json:"memory_budget"`
	Semantics    string `json:"semantics"`
	Kernel       string `json:"kernel"`
	Warm         bool   `json:"warm"`
	// VerifyQueries random queries must give identical results on the old
	// and the new handle before the swap (default 8; 0 after an explicit
	// semantics or kernel change, which changes results by design).
	VerifyQueries *int `json:"verify_queries"`
}

// Switch moves name to another mode/backend while it keeps serving: the new
// handle opens (and warms) beside the old one, a few queries are compared,
// the pointer swaps, and the old handle closes after its last query.
func (r *Registry) Switch(name string, sw SwitchSpec) error {
	e := r.get(name)
	if e == nil {
		return notFound(name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.cur.Load()
	if old == nil {
		return notFound(name)
	}
	spec := old.spec
	if sw.Mode != "" {
		spec.Mode = sw.Mode
		if sw.Backend == "" && sw.Mode == "memory_efficient" && spec.Backend == "memory" {
			spec.Backend = ""
		}
		if sw.Mode == "full" {
			spec.Backend = ""
		}
	}
	if sw.Backend != "" {
		spec.Backend = sw.Backend
	}
	if sw.CacheBytes != 0 {
		spec.CacheBytes = sw.CacheBytes
	}
	if sw.MemoryBudget != 0 {
		spec.MemoryBudget = sw.MemoryBudget
	}
	if spec.Mode == "full" || (sw.Backend != "" && sw.MemoryBudget == 0) {
		spec.MemoryBudget = 0 // a budget is planned for one backend; say it again with another
	}
	verify := 8
	if sw.Semantics != "" || sw.Kernel != "" {
		verify = 0
	}
	if sw.Semantics != "" {
		spec.Semantics = sw.Semantics
	}
	if sw.Kernel != "" {
		spec.Kernel = sw.Kernel
	}
	if sw.VerifyQueries != nil {
		verify = *sw.VerifyQueries
	}
	e.state.Store("switching")
	fail := func(err error) error {
		e.state.Store("serving")
		e.lastErr.Store(err.Error())
		return err
	}
	h, err := r.open(spec)
	if err != nil {
		return fail(err)
	}
	if sw.Warm {
		if err := h.warm(); err != nil {
			h.retire()
			return fail(err)
		}
	}
	if err := sameAnswers(old, h, verify); err != nil {
		h.retire()
		return fail(err)
	}
	e.cur.Store(h)
	old.retire()
	e.state.Store("serving")
	e.lastErr.Store("")
	return nil
}

// sameAnswers runs n random queries on both handles and requires identical
// ids and distances.
func sameAnswers(a, b *handle, n int) error {
	if n <= 0 || a.idx.NTotal() == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for i := range n {
		p := hnswsearch.Params{K: 10}
		var ra, rb []hnswsearch.Result
		var ea, eb error
		if a.idx.Binary() {
			q := make([]byte, a.idx.Dim())
			for j := range q {
				q[j] = byte(rng.Uint32())
			}
			ra, _, ea = a.idx.SearchBinary(q, p, nil)
			rb, _, eb = b.idx.SearchBinary(q, p, nil)
		} else {
			q := make([]float32, a.idx.Dim())
			for j := range q {
				q[j] = float32(rng.NormFloat64())
			}
			ra, _, ea = a.idx.Search(q, p, nil)
			rb, _, eb = b.idx.Search(q, p, nil)
		}
		if ea != nil || eb != nil {
			return fmt.Errorf("switch check query %d failed: old: %v, new: %v", i, ea, eb)
		}
		if !slices.Equal(ra, rb) {
			return &apiError{500, "switch_verification_failed", fmt.Sprintf("switch aborted: query %d gives different results in the new mode; the old mode keeps serving", i)}
		}
	}
	return nil
}

// warm pulls the graph, then the vectors, into the cache or page cache.
func (h *handle) warm() error {
	var limit int64
	if c := h.cache(); c != nil {
		limit = c.Budget()
	}
	return h.idx.Warm(limit)
}
