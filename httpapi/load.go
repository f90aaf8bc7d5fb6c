package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// The answers of a load and a warm-up past switch_timeout.
var (
	errLoadTimeout   = errGatewayTimeout("load_timeout", "load abandoned: it did not finish within the switch timeout (switch_timeout)")
	errWarmupTimeout = errGatewayTimeout("warmup_timeout", "warm-up abandoned: it did not finish within the switch timeout (switch_timeout); the index keeps serving")
)

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
	if r.get(name) != nil {
		r.mu.Unlock()
		return errConflict("index_exists", fmt.Sprintf("index %q is loaded or being loaded; switch it with PUT /indexes/%s/_mode or DELETE it first", name, name))
	}
	if _, ok := r.snapshot().aliases[name]; ok {
		r.mu.Unlock()
		return errBadRequest("invalid_index_name", fmt.Sprintf("%q is an alias: an index may not have an alias's name (POST /_aliases removes it)", name))
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
	if err == nil {
		if _, ok := r.serve(e, h); !ok {
			h.retire() // deleted while it opened
		}
	}
	switch {
	case e.deleted.Load():
		err = errConflict("index_deleted", fmt.Sprintf("index %q was deleted while it loaded", name))
	case err != nil && opEnded(ctx, errLoadTimeout) != nil:
		err = opEnded(ctx, errLoadTimeout) // what ended it, not the read it interrupted
	}
	if err != nil {
		r.mu.Lock()
		if r.get(name) == e {
			r.setLocked(name, nil)
		}
		r.mu.Unlock()
		return err
	}
	e.state.Store("serving")
	return nil
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
func (r *Registry) openUnguarded(ctx context.Context, e *entry, spec LoadSpec) (*handle, error) {
	if spec.Mode == "" {
		spec.Mode = engine.ModeMemoryEfficient
	}
	es, err := r.engineSpec(ctx, e, spec)
	if err != nil {
		return nil, err
	}
	// The plan holds the index file open from Prepare until its storage
	// takes it over or, in mode full, reads it and closes it: one
	// descriptor counted from before Prepare, whatever the handle keeps.
	// An index that could never fit is told so first, from what the
	// request names (a backend, rerank vectors).
	opening := storageFiles(es.Path, "")
	if err := r.filesFit(handleFiles(spec)); err != nil {
		return nil, err
	}
	if err := r.admitFiles(opening, 0, besideFiles(e)); err != nil {
		return nil, err
	}
	defer e.building.Store(nil)
	plan, err := r.prepare(es)
	if err != nil {
		r.files.Add(-opening)
		return nil, err
	}
	spec = servedSpec(spec, plan)
	files := handleFiles(spec)
	x, need, err := r.reserveAndOpen(e, plan, files, opening)
	if err != nil {
		return nil, err
	}
	h := &handle{spec: spec, path: es.Path, x: x, reserved: need, files: files, fds: &r.files}
	h.resident.Store(need)
	for _, c := range h.caches() {
		h.planned = append(h.planned, c.Budget())
	}
	return h, nil
}

// engineSpec is spec for the engine: its paths resolved inside the data
// roots, its ef_search checked, the server's directories and e's
// guide-build progress set. The engine names every file as the client
// sent it (its labels: spec's paths) or by the setting that holds it
// (guide_dir), never by the server's path.
func (r *Registry) engineSpec(ctx context.Context, e *entry, spec LoadSpec) (es engine.Spec, err error) {
	path, err := r.resolve(spec.Path)
	if err != nil {
		return es, err
	}
	if spec.EfSearch < 0 || spec.EfSearch > r.limits.MaxEfSearch {
		return es, badRequest("ef_search=%d is out of range [1, %d] (0 or absent: the file's)", spec.EfSearch, r.limits.MaxEfSearch)
	}
	es = spec.engineSpec()
	es.Path, es.GuideDir, es.RemoteGuideDir, es.Ctx = path, r.guideDir, r.remoteGuideDir, ctx
	if r.guideDir != "" {
		es.GuideDirLabel = "guide_dir"
	}
	es.CacheDir, es.Env = r.cacheOpen, r.env
	es.MachineMemory = r.total
	es.Progress = func(done, total int64) { e.building.Store(&[2]int64{done, total}) }
	if spec.VectorsPath != "" {
		if es.VectorsPath, err = r.resolve(spec.VectorsPath); err != nil {
			return es, err
		}
	}
	if rs := spec.Rerank; rs != nil {
		es.Rerank = &engine.RerankSpec{Label: rs.VectorsPath, Strategy: rs.Strategy, Oversample: rs.OversampleFactor}
		switch {
		case rs.VectorsPath == "" && spec.Mode == engine.ModeOnDisk:
			// on_disk's default: the index's own full-precision vectors
		case rs.VectorsPath == "":
			return es, badRequest("rerank.vectors_path is required in mode %s (the full-precision vectors to rescore with)", spec.Mode)
		default:
			if es.Rerank.Path, err = r.resolve(rs.VectorsPath); err != nil {
				return es, err
			}
		}
	}
	if es.Mode == engine.ModeOnDisk && es.MemoryBudget == 0 && r.budget > 0 {
		// Planned under the node's free memory when that cannot hold the
		// index's files and their 4x guide (engine's machineBudget), as a
		// command serving one index is under the machine's.
		es.MachineBudget, es.Room = true, max(r.room(), 1)
	}
	return es, nil
}

// prepare has the engine check and plan es. A plan that does not fit in
// the node's free memory is refused as admit refuses a load: 429, or 400
// when it would not fit in the whole budget.
func (r *Registry) prepare(es engine.Spec) (*engine.Plan, error) {
	plan, err := engine.Prepare(es)
	if err != nil && es.Room > 0 && errors.Is(err, engine.ErrBudget) {
		// What the node has free is too little: the node is full, as for
		// any load that does not fit (admit), not the request wrong. When
		// the whole budget was free, it can never fit: a 400.
		if es.Room >= r.budget {
			return nil, errBadRequest("memory_budget_exceeded", err.Error())
		}
		return nil, errTooMany("memory_budget_exceeded", err.Error())
	}
	return plan, err
}

// servedSpec is spec as plan serves it: the backend, compression and
// rerank source it chose, which GET shows and a switch starts from.
func servedSpec(spec LoadSpec, plan *engine.Plan) LoadSpec {
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
	return spec
}

// reserveAndOpen reserves plan's bytes in the node's budget (admit) and
// files descriptors (admitFiles, of which opening, the plan's open file,
// are counted already), and opens the index; need is what stays reserved
// for it. The bytes are reserved, not the lock held, while the index
// opens: an open that builds a guide (or blocks on a file) must not stall
// every other load and switch on the node.
func (r *Registry) reserveAndOpen(e *entry, plan *engine.Plan, files, opening int64) (x *engine.Index, need int64, err error) {
	need = plan.NeedBytes()
	var beside int64 // a switch: the handle it replaces counts until then, its caches at least at the floor
	if old := e.cur.Load(); old != nil {
		_, give := shrinkable([]*handle{old})
		beside = old.resident.Load() - give
	}
	opened := max(files, opening) // counted while the index opens
	r.memMu.Lock()
	err = r.admitFiles(files, opening, besideFiles(e)) // first: it shrinks no cache
	if err == nil {
		if err = r.admit(need, beside); err != nil {
			r.files.Add(opening - opened)
		}
	}
	if err == nil {
		r.reserved.Add(need)
	}
	r.memMu.Unlock()
	if err != nil {
		plan.Discard()
		r.files.Add(-opening)
		return nil, 0, err
	}
	if x, err = plan.Open(); err != nil {
		r.reserved.Add(-need)
		r.files.Add(-opened)
		return nil, 0, err
	}
	// From here on, what the handle holds (mode full read its file and
	// closed it).
	r.files.Add(files - opened)
	if spare := min(x.SpareBytes(), need); spare > 0 { // planned, not held: the node's again
		r.reserved.Add(-spare)
		need -= spare
	}
	return x, need, nil
}
