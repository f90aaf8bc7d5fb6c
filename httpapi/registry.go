package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/filekind"
)

// cacheFloor is the smallest a cache shrinks to when the budget is tight.
const cacheFloor = 1 << 20

// entry is one named index: the handle serving it and its statistics.
type entry struct {
	name    string
	cur     atomic.Pointer[handle]
	mu      sync.Mutex // one load or switch at a time (a delete never waits for it)
	stats   queryStats
	state   atomic.Value // string: "loading", "serving", "switching"
	lastErr atomic.Value // string: why the last switch failed
	// deleted is set by Delete; cancel ends the switch in progress, if any.
	deleted  atomic.Bool
	cancelMu sync.Mutex
	cancel   context.CancelFunc
	// life ends when the index is deleted, with notFound as its cause:
	// the loads, switches and warm-ups under way give up their reads.
	life context.Context
	end  context.CancelCauseFunc
	// building is the progress of an on_disk guide being built for a load
	// or switch: bytes read and total (nil when none is).
	building atomic.Pointer[[2]int64]
	// checking is set while the file watcher checks the entry's files.
	checking atomic.Bool
	// adm admits the index's searches within its share of the server's
	// slots and queue (indexAdmission), so one whose storage stalls (an
	// object store that stops answering) cannot starve the others.
	adm *admission
}

// indexAdmission is an index's share of the server's search slots and
// queue l: three quarters of each (at least one slot).
func indexAdmission(l Limits) *admission {
	return newAdmission(max(1, l.MaxConcurrentSearches*3/4), l.MaxQueuedSearches*3/4)
}

// setCancel records (or, with nil, clears) the running switch's cancel.
func (e *entry) setCancel(c context.CancelFunc) {
	e.cancelMu.Lock()
	e.cancel = c
	e.cancelMu.Unlock()
}

// cancelSwitch ends a switch in progress (DELETE).
func (e *entry) cancelSwitch() {
	e.cancelMu.Lock()
	if e.cancel != nil {
		e.cancel()
	}
	e.cancelMu.Unlock()
}

// Registry holds the served indexes and the node-wide memory budget.
type Registry struct {
	roots []string // data roots, symlinks resolved
	given []string // data roots as configured (absolute), for the check before any lookup
	// buckets are the S3 buckets whose objects may be served (allowBuckets).
	buckets []string
	budget  int64 // bytes; 0 = unlimited
	limits  Limits
	// guideDir holds on_disk guide files ("": beside each index).
	guideDir string
	// cacheDir is the disk cache of s3:// indexes: its path, and the
	// directory every load shares (nil: none).
	cacheDir  string
	cacheOpen *engine.CacheDir
	// env is the process's S3 client and kernels, given to every load.
	env *engine.Env

	// entries is never changed in place: a load or delete stores a changed
	// copy (under mu), so a lookup is one atomic load with no lock (a read
	// lock writes a counter every core shares, on every request).
	mu      sync.Mutex
	entries atomic.Pointer[map[string]*entry]
	memMu   sync.Mutex // serialises budget checks with the reservations they make
	// reserved is what admitted opens hold until their handle counts it.
	reserved atomic.Int64
	// base ends at the end of a shutdown's grace period (Server.Serve),
	// with errShuttingDown as its cause: loads, switches and warm-ups
	// then give up (nil before a server serves).
	base atomic.Pointer[context.Context]
}

// opContext is the context of a load, switch or warm-up of e under ctx:
// it ends at timeout, when e is deleted (cause notFound) and at the end
// of a shutdown's grace period (cause errShuttingDown). Its reads from an
// object store give up then (engine binds it to them), so the work ends
// and its client is answered within a moment (opEnded says what).
func (r *Registry) opContext(ctx context.Context, e *entry, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	ctx, cancel := context.WithCancelCause(ctx)
	var stops []func() bool
	ends := []context.Context{e.life}
	if b := r.base.Load(); b != nil {
		ends = append(ends, *b)
	}
	for _, end := range ends {
		if end != nil {
			stops = append(stops, context.AfterFunc(end, func() { cancel(context.Cause(end)) }))
		}
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel(nil)
		cancelTimeout()
	}
}

// opEnded is the answer of a load, switch or warm-up whose context
// (opContext) has ended, nil while it goes on: the cause's own (the index
// deleted, the server shutting down), else timeout at the deadline.
func opEnded(ctx context.Context, timeout *apiError) error {
	if ctx.Err() == nil {
		return nil
	}
	var ae *apiError
	switch cause := context.Cause(ctx); {
	case errors.As(cause, &ae):
		return ae
	case errors.Is(cause, context.DeadlineExceeded):
		return timeout
	}
	return nil
}

// The answers of a load and a warm-up past switch_timeout.
var (
	errLoadTimeout   = &apiError{504, "load_timeout", "load abandoned: it did not finish within the switch timeout (switch_timeout)"}
	errWarmupTimeout = &apiError{504, "warmup_timeout", "warm-up abandoned: it did not finish within the switch timeout (switch_timeout); the index keeps serving"}
)

// NewRegistry serves indexes from files under roots within budget bytes
// (with no root, every local path is refused: a server of S3 objects).
func NewRegistry(roots []string, budget int64) (*Registry, error) {
	r := &Registry{budget: budget, limits: Limits{}.withDefaults(0)}
	r.entries.Store(&map[string]*entry{})
	for _, root := range roots {
		if err := CheckDataRoot(root); err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(root)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("data root %q: %w", root, err)
		}
		r.roots = append(r.roots, abs)
		if given, err := filepath.Abs(root); err == nil {
			r.given = append(r.given, given)
		}
	}
	return r, nil
}

// CheckDataRoot refuses what cannot be a data root: an empty one ("" is
// the working directory to the path functions, "/" in a container, and
// would open every file to the API) and one that is not an existing
// directory (every load under it would fail, the server up all the same).
func CheckDataRoot(root string) error {
	if strings.TrimSpace(root) == "" {
		return fmt.Errorf("data root %q is empty: name a directory (an empty entry, such as a trailing colon in FAISS_SIDECAR_DATA_ROOT, is refused)", root)
	}
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("data root %q does not exist: name an existing directory", root)
	case err != nil:
		return fmt.Errorf("data root %q cannot be read: %v", root, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("data root %q is %s: name a directory", root, filekind.Of(fi.Mode()))
	}
	return nil
}

// resolve maps a request path (relative to the first data root, or
// absolute) to a regular file that lies, after symlinks, inside a data
// root. A path outside every root is a 403 whether or not it exists: the
// check comes before any lookup, so the answer tells nothing about the
// file system outside the roots. An s3://BUCKET/KEY path is confined to
// the allowed buckets instead (resolveObject).
func (r *Registry) resolve(p string) (string, error) {
	if p == "" {
		return "", badRequest("path is required")
	}
	if len(p) > maxPathBytes {
		return "", badRequest("path of %d bytes is longer than %d", len(p), maxPathBytes)
	}
	if engine.IsRemote(p) {
		return r.resolveObject(p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", badRequest("path %q holds a NUL byte", p)
	}
	// Messages name the path as the client sent it (sent), never the
	// server's spelling of it: the data root's location is the server's.
	sent := p
	if len(r.roots) == 0 {
		return "", &apiError{403, "forbidden_path", fmt.Sprintf("%s: no data root is configured on this server: only s3:// objects are served", sent)}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.roots[0], p)
	}
	p = filepath.Clean(p)
	outside := &apiError{403, "forbidden_path", fmt.Sprintf("%s is outside the data roots", sent)}
	if !within(r.roots, p) && !within(r.given, p) {
		return "", outside
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if os.IsNotExist(err) && r.missingInside(p) {
			return "", &apiError{404, "file_not_found", fmt.Sprintf("no file at %s", sent)}
		}
		return "", outside
	}
	if !within(r.roots, real) {
		return "", outside
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", &apiError{403, "forbidden_path", fmt.Sprintf("cannot stat %s", sent)}
	}
	if !fi.Mode().IsRegular() {
		return "", badRequest("%s is %s, not a regular file", sent, filekind.Of(fi.Mode()))
	}
	return real, nil
}

// missingInside reports whether p, which does not resolve, is missing
// inside a data root: its nearest existing ancestor resolves inside one,
// and no dangling symlink on the way points outside (a 404 there would
// tell whether the outside target exists).
func (r *Registry) missingInside(p string) bool {
	for q := p; ; q = filepath.Dir(q) {
		if fi, err := os.Lstat(q); err == nil {
			if fi.Mode()&os.ModeSymlink == 0 {
				real, err := filepath.EvalSymlinks(q)
				return err == nil && within(r.roots, real)
			}
			t, err := os.Readlink(q)
			if err != nil {
				return false
			}
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(q), t)
			}
			if t = filepath.Clean(t); !within(r.roots, t) && !within(r.given, t) {
				return false
			}
		}
		if q == filepath.Dir(q) {
			return false
		}
	}
}

// maxPathBytes is the longest path a load names (Linux's PATH_MAX).
const maxPathBytes = 4096

// within reports whether path p lies inside one of roots.
func within(roots []string, p string) bool {
	for _, root := range roots {
		if rel, err := filepath.Rel(root, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
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
	l, err := e.lease()
	return e, l, err
}

// lease takes a lease on the handle serving e.
func (e *entry) lease() (lease, error) {
	for {
		h := e.cur.Load()
		if h == nil {
			return lease{}, notFound(e.name)
		}
		if l, ok := h.acquire(); ok {
			return l, nil
		}
	}
}

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
		return &apiError{400, "memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: the index needs %d bytes, more than the node's whole budget of %d (ask for less, or raise the server's memory_budget)", need, r.budget)}
	}
	if need+beside > r.budget {
		return &apiError{400, "memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: the new mode needs %d bytes beside the %d the current one holds until the switch ends, more than the node's whole budget of %d (DELETE the index and load it in the new mode, or ask for less)", need, beside, r.budget)}
	}
	used, hs := r.usage()
	if used+need <= r.budget {
		return nil
	}
	cs, give := shrinkable(hs) // if what they can give is not enough, none is shrunk
	if used+need-give > r.budget {
		return &apiError{429, "memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: need %d bytes, %d of %d in use by loaded indexes, and their caches could give back only %d (down to %d bytes each)",
			need, used, r.budget, give, cacheFloor)}
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
		return &apiError{429, "memory_budget_exceeded", fmt.Sprintf(
			"memory budget exceeded: need %d bytes, %d of %d in use by loaded indexes (caches already shrunk to %d bytes where possible)",
			need, used, r.budget, cacheFloor)}
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

// open builds a handle for spec (normalised) within the budget: it
// resolves the paths, and engine checks, plans and opens the index.
func (r *Registry) open(ctx context.Context, e *entry, spec LoadSpec) (h *handle, err error) {
	defer func() { // a bug in a load fails that load, leaving no half-registered name behind
		if p := recover(); p != nil {
			h, err = nil, fmt.Errorf("internal error while loading %s: %v", spec.Path, p)
		}
	}()
	return r.openUnguarded(ctx, e, spec)
}

// openUnguarded is open without its recover.
func (r *Registry) openUnguarded(ctx context.Context, e *entry, spec LoadSpec) (_ *handle, err error) {
	if spec.Mode == "" {
		spec.Mode = "memory_efficient"
	}
	// Errors name the files as the client sent them (relabel); the
	// handle keeps the names for its later errors (handle.failure).
	names := r.dirNames()
	defer func() { err = relabel(err, names) }()
	path, err := r.resolve(spec.Path)
	if err != nil {
		return nil, err
	}
	names = sortNames(append(names, serverName{path, spec.Path}))
	if spec.EfSearch < 0 || spec.EfSearch > r.limits.MaxEfSearch {
		return nil, badRequest("ef_search=%d is out of range [1, %d] (0 or absent: the file's)", spec.EfSearch, r.limits.MaxEfSearch)
	}
	es := spec.engineSpec()
	es.Path, es.GuideDir, es.Ctx = path, r.guideDir, ctx
	es.CacheDir, es.Env = r.cacheOpen, r.env
	es.Progress = func(done, total int64) { e.building.Store(&[2]int64{done, total}) }
	defer e.building.Store(nil)
	if spec.VectorsPath != "" {
		if es.VectorsPath, err = r.resolve(spec.VectorsPath); err != nil {
			return nil, err
		}
		names = sortNames(append(names, serverName{es.VectorsPath, spec.VectorsPath}))
	}
	if rs := spec.Rerank; rs != nil {
		es.Rerank = &engine.RerankSpec{Label: rs.VectorsPath, Strategy: rs.Strategy, Oversample: rs.OversampleFactor}
		switch {
		case rs.VectorsPath == "" && spec.Mode == engine.ModeOnDisk:
			// on_disk's default: the index's own full-precision vectors
		case rs.VectorsPath == "":
			return nil, badRequest("rerank.vectors_path is required in mode %s (the full-precision vectors to rescore with)", spec.Mode)
		default:
			if es.Rerank.Path, err = r.resolve(rs.VectorsPath); err != nil {
				return nil, err
			}
			names = sortNames(append(names, serverName{es.Rerank.Path, rs.VectorsPath}))
		}
	}
	if es.Mode == engine.ModeOnDisk && es.MemoryBudget == 0 && r.budget > 0 {
		// Planned under the node's free memory when that cannot hold the
		// index's files and their 4x guide (engine's machineBudget), as a
		// command serving one index is under the machine's.
		es.MachineBudget, es.Room = true, max(r.room(), 1)
	}
	plan, err := engine.Prepare(es)
	if err != nil && es.Room > 0 && errors.Is(err, engine.ErrBudget) {
		// What the node has free is too little: the node is full, as for
		// any load that does not fit (admit), not the request wrong. When
		// the whole budget was free, it can never fit: a 400.
		status := 429
		if es.Room >= r.budget {
			status = 400
		}
		return nil, &apiError{status, "memory_budget_exceeded", err.Error()}
	}
	if err != nil {
		return nil, err
	}
	spec.Backend = plan.Backend()
	spec.Compression = plan.Spec().Compression
	if rs := plan.Spec().Rerank; rs != nil {
		vp := spec.Path // on_disk's default: the index file's own vectors, or its separate vector file
		if spec.VectorsPath != "" {
			vp = spec.VectorsPath
		}
		if spec.Rerank != nil && spec.Rerank.VectorsPath != "" {
			vp = spec.Rerank.VectorsPath
		}
		spec.Rerank = &RerankSpec{VectorsPath: vp, Strategy: rs.Strategy, OversampleFactor: rs.Oversample}
	}
	// The bytes are reserved, not the lock held, while the index opens: an
	// open that builds a guide (or blocks on a file) must not stall every
	// other load and switch on the node.
	need := plan.NeedBytes()
	var beside int64 // a switch: the handle it replaces counts until then, its caches at least at the floor
	if old := e.cur.Load(); old != nil {
		_, give := shrinkable([]*handle{old})
		beside = old.resident.Load() - give
	}
	r.memMu.Lock()
	err = r.admit(need, beside)
	if err == nil {
		r.reserved.Add(need)
	}
	r.memMu.Unlock()
	if err != nil {
		plan.Discard()
		return nil, err
	}
	x, err := plan.Open()
	if err != nil {
		r.reserved.Add(-need)
		return nil, err
	}
	if spare := min(x.SpareBytes(), need); spare > 0 { // planned, not held: the node's again
		r.reserved.Add(-spare)
		need -= spare
	}
	h := &handle{spec: spec, path: path, x: x, reserved: need, names: names}
	h.resident.Store(need)
	for _, c := range h.caches() {
		h.planned = append(h.planned, c.Budget())
	}
	return h, nil
}

// Load serves spec under name; a name already served is a 409.
func (r *Registry) Load(name string, spec LoadSpec) error {
	return r.LoadContext(context.Background(), name, spec)
}

// LoadContext is Load abandoned when ctx ends, after
// Limits.SwitchTimeout (504 load_timeout), on a DELETE (409
// index_deleted) or at the end of a shutdown's grace period (503).
func (r *Registry) LoadContext(ctx context.Context, name string, spec LoadSpec) error {
	if err := checkName(name); err != nil {
		return err
	}
	r.mu.Lock()
	if _, ok := r.all()[name]; ok {
		r.mu.Unlock()
		return &apiError{409, "index_exists", fmt.Sprintf("index %q is loaded or being loaded; switch it with PUT /indexes/%s/_mode or DELETE it first", name, name)}
	}
	defer r.regrow() // after the reservation is given back, whatever the outcome
	e := &entry{name: name, adm: indexAdmission(r.limits)}
	e.life, e.end = context.WithCancelCause(context.Background())
	e.state.Store("loading")
	e.mu.Lock()
	r.setLocked(name, e)
	r.mu.Unlock()
	defer e.mu.Unlock()
	ctx, cancel := r.opContext(ctx, e, r.limits.SwitchTimeout)
	defer cancel()
	h, err := r.open(ctx, e, spec)
	if h != nil {
		defer r.reserved.Add(-h.reserved) // counted by the handle from here on, or retired
	}
	if err == nil && e.deleted.Load() {
		h.retire()
	}
	switch {
	case e.deleted.Load():
		err = &apiError{409, "index_deleted", fmt.Sprintf("index %q was deleted while it loaded", name)}
	case err != nil && opEnded(ctx, errLoadTimeout) != nil:
		err = opEnded(ctx, errLoadTimeout) // what ended it, not the read it interrupted
	}
	if err != nil {
		r.mu.Lock()
		if r.all()[name] == e {
			r.setLocked(name, nil)
		}
		r.mu.Unlock()
		return err
	}
	e.cur.Store(h)
	e.state.Store("serving")
	return nil
}

// Delete stops serving name at once, cancelling a switch in progress, and
// waits (up to wait) for its in-flight queries before the handle closes.
// It never waits for a load or switch.
func (r *Registry) Delete(name string, wait time.Duration) error {
	r.mu.Lock()
	e, ok := r.all()[name]
	if ok {
		r.setLocked(name, nil)
		e.deleted.Store(true)
	}
	r.mu.Unlock()
	if !ok {
		return notFound(name)
	}
	e.cancelSwitch()
	e.end(notFound(name))
	if h := e.cur.Swap(nil); h != nil {
		h.retire()
		deadline := time.Now().Add(wait)
		for h.users.count() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	r.regrow()
	return nil
}

// SwitchSpec is the body of PUT /indexes/{name}/_mode: fields left empty
// keep their current value.
type SwitchSpec struct {
	Mode        string `json:"mode"`
	Compression string `json:"compression"` // on_disk's guide: auto (default), 4x, 5x, 6x, 8x, 16x, 32x
	Backend     string `json:"backend"`
	CacheBytes  int64  `json:"cache_bytes"`
	// MemoryBudget switches to (or re-plans) the bounded-memory policy.
	MemoryBudget int64  `json:"memory_budget"`
	Semantics    string `json:"semantics"`
	Kernel       string `json:"kernel"`
	Warm         bool   `json:"warm"`
	// EfSearch changes the index-level efSearch (LoadSpec.EfSearch; -1:
	// back to the file's).
	EfSearch int `json:"ef_search"`
	// VerifyQueries random queries must give identical results on the old
	// and the new handle before the swap (default 8; 0 after an explicit
	// semantics or kernel change, which changes results by design; at most
	// Limits.MaxVerifyQueries).
	VerifyQueries *int `json:"verify_queries"`
}

// defaultVerifyQueries is how many check queries a switch runs by default.
const defaultVerifyQueries = 8

// Switch moves name to another mode/backend while it keeps serving: the new
// handle opens (and warms) beside the old one, a few queries are compared,
// the pointer swaps, and the old handle closes after its last query. A
// second switch of the same index while one runs is a 409; the switch is
// abandoned when ctx ends, after Limits.SwitchTimeout, or on a DELETE,
// and the old mode keeps serving.
func (r *Registry) Switch(ctx context.Context, name string, sw SwitchSpec) error {
	e := r.get(name)
	if e == nil {
		return notFound(name)
	}
	if !e.mu.TryLock() {
		return &apiError{409, "switch_in_progress", fmt.Sprintf("index %q is being loaded or switched; retry when GET /indexes/%s shows it serving", name, name)}
	}
	defer e.mu.Unlock()
	defer r.regrow() // after the reservation is given back and the old handle retired
	old := e.cur.Load()
	if old == nil || e.deleted.Load() {
		return notFound(name)
	}
	// The check queries read the old handle: a lease keeps it open should
	// a DELETE retire it meanwhile.
	ol, ok := old.acquire()
	if !ok {
		return notFound(name)
	}
	defer ol.release()
	change := engine.Change{Mode: sw.Mode, Backend: sw.Backend, CacheBytes: sw.CacheBytes, MemoryBudget: sw.MemoryBudget,
		EfSearch: sw.EfSearch, Semantics: sw.Semantics, Kernel: sw.Kernel, Compression: sw.Compression}
	spec := old.spec
	spec.setEngineSpec(change.Apply(old.spec.engineSpec()))
	if old.spec.Mode == engine.ModeOnDisk && spec.Mode != engine.ModeOnDisk && spec.Rerank != nil && (spec.Rerank.VectorsPath == spec.Path || spec.Rerank.VectorsPath == spec.VectorsPath) {
		spec.Rerank = nil // on_disk's own rerank source goes with it
	}
	verify := defaultVerifyQueries
	if change.ChangesResults(old.spec.engineSpec()) {
		verify = 0
	}
	if v := sw.VerifyQueries; v != nil {
		if *v < 0 || *v > r.limits.MaxVerifyQueries {
			return badRequest("verify_queries=%d is out of range [0, %d] (max_verify_queries)", *v, r.limits.MaxVerifyQueries)
		}
		verify = *v
	}
	ctx, cancel := r.opContext(ctx, e, r.limits.SwitchTimeout)
	defer cancel()
	e.setCancel(cancel)
	defer e.setCancel(nil)
	e.state.Store("switching")
	fail := func(err error) error {
		err = relabel(err, old.names) // check queries' errors name the files too
		e.state.Store("serving")
		e.lastErr.Store(err.Error())
		return err
	}
	if old.failed.Load() == nil {
		switch err := old.checkFileContext(ctx); {
		case isFileChanged(err):
			old.markFailed(err)
			verify = 0 // the old handle cannot answer: its file changed (this switch is the reload)
		case errors.Is(err, engine.ErrObjectStore):
			// The store failed for good: opening the object anew would
			// wait as long again before failing the same way.
			return fail(err)
		case err != nil:
			if derr := switchDone(ctx, e); derr != nil {
				return fail(derr)
			}
		}
	} else {
		verify = 0
	}
	h, err := r.open(ctx, e, spec)
	if h != nil {
		defer r.reserved.Add(-h.reserved) // counted by the handle from here on, or retired
	}
	if err != nil {
		if derr := switchDone(ctx, e); derr != nil {
			err = derr // deleted or timed out while the new handle opened
		}
		return fail(err)
	}
	abandon := func(err error) error {
		h.retire()
		return fail(err)
	}
	if err := sameShape(old, h); err != nil {
		return abandon(err)
	}
	if sw.Warm {
		if err := h.x.WarmContext(ctx); err != nil {
			if derr := switchDone(ctx, e); derr != nil {
				err = derr
			}
			return abandon(err)
		}
	}
	if err := sameAnswers(ctx, func() error { return switchDone(ctx, e) }, old, h, verify); err != nil {
		if derr := switchDone(ctx, e); derr != nil {
			err = derr // deleted or timed out meanwhile: say that, not what it caused
		}
		return abandon(err)
	}
	if err := switchDone(ctx, e); err != nil {
		return abandon(err)
	}
	e.cur.Store(h)
	old.retire()
	e.state.Store("serving")
	e.lastErr.Store("")
	return nil
}

// switchDone reports why a switch must be abandoned now, if it must.
func switchDone(ctx context.Context, e *entry) error {
	switch {
	case e.deleted.Load():
		return notFound(e.name)
	case ctx.Err() == nil:
		return nil
	}
	var ae *apiError
	switch cause := context.Cause(ctx); {
	case errors.As(cause, &ae): // shutting down
		return ae
	case errors.Is(cause, context.DeadlineExceeded):
		return &apiError{504, "switch_timeout", "switch abandoned: it did not finish within the switch timeout; the old mode keeps serving"}
	default:
		return &apiError{409, "switch_cancelled", "switch cancelled; the old mode keeps serving"}
	}
}

// sameShape refuses a switch to a file that clients cannot query as before:
// another dimension, metric or vector type.
func sameShape(a, b *handle) error {
	x, y := a.x, b.x
	if x.Dim() != y.Dim() || x.Binary() != y.Binary() || x.Metric() != y.Metric() {
		return &apiError{409, "index_shape_changed", fmt.Sprintf(
			"switch aborted: %s now holds d=%d %s (binary %v), the served index has d=%d %s (binary %v); load it under another name or DELETE first",
			b.spec.Path, y.Dim(), y.Metric(), y.Binary(), x.Dim(), x.Metric(), x.Binary())}
	}
	return nil
}

// sameAnswers runs n random queries on both handles and requires identical
// ids and distances; before each it asks stop whether to give up.
func sameAnswers(ctx context.Context, stop func() error, a, b *handle, n int) error {
	if n <= 0 || a.x.NTotal() == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	const k = 10
	var ra, rb []engine.Neighbor
	q := make([]float32, a.x.Dim())
	qb := make([]byte, a.x.Dim())
	for i := range n {
		if err := stop(); err != nil {
			return err
		}
		var ea, eb error
		var vec []float32
		var code []byte
		if a.x.Binary() {
			for j := range qb {
				qb[j] = byte(rng.Uint32())
			}
			code = qb
		} else {
			for j := range q {
				q[j] = float32(rng.NormFloat64())
			}
			vec = q
		}
		// ctx: a stalled store's reads end with the switch
		ra, ea = a.x.CheckSearch(ctx, vec, code, k, ra[:0])
		rb, eb = b.x.CheckSearch(ctx, vec, code, k, rb[:0])
		if eb == nil && (isFileChanged(ea) || (ea == nil && !slices.Equal(ra, rb) && oldFileChanged(ctx, a))) {
			return nil // the old file changed meanwhile: the new handle is its reload
		}
		if ea != nil || eb != nil {
			return &apiError{409, "switch_verification_failed", fmt.Sprintf("switch aborted: check query %d failed: old: %v, new: %v; the old mode keeps serving", i, ea, eb)}
		}
		if !slices.Equal(ra, rb) {
			return &apiError{409, "switch_verification_failed", fmt.Sprintf("switch aborted: check query %d gives different results in the new mode; the old mode keeps serving", i)}
		}
	}
	return nil
}

// oldFileChanged reports whether h's file changed since it was opened,
// marking h failed if so (its searches then answer 503 until the switch
// that found it replaces it).
func oldFileChanged(ctx context.Context, h *handle) bool {
	err := h.checkFileContext(ctx)
	if !isFileChanged(err) {
		return false
	}
	h.markFailed(err)
	return true
}
