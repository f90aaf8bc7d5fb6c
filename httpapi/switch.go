package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// SwitchSpec is the body of PUT /indexes/{name}/_mode: fields left empty
// keep their current value.
type SwitchSpec struct {
	Mode        engine.Mode    `json:"mode"`
	Compression string         `json:"compression"` // on_disk's guide: auto (default), 4x, 5x, 6x, 8x, 16x, 32x
	Backend     engine.Backend `json:"backend"`
	CacheBytes  int64          `json:"cache_bytes"`
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
		return errIndexNotFound(name)
	}
	if !e.mu.TryLock() {
		return errConflict("switch_in_progress", fmt.Sprintf("index %q is being loaded or switched; retry when GET /indexes/%s shows it serving", name, name))
	}
	defer e.mu.Unlock()
	defer r.regrow() // after the reservation is given back and the old handle retired
	old := e.cur.Load()
	if old == nil || e.deleted.Load() {
		return errIndexNotFound(name)
	}
	// The check queries read the old handle: a lease keeps it open should
	// a DELETE retire it meanwhile.
	ol, ok := old.acquire()
	if !ok {
		return errIndexNotFound(name)
	}
	defer ol.release()
	spec, verify, err := r.switchSpec(old.spec, sw)
	if err != nil {
		return err
	}
	ctx, cancel := r.opContext(ctx, e, r.limits.SwitchTimeout)
	defer cancel()
	e.setCancel(cancel)
	defer e.setCancel(nil)
	e.state.Store("switching")
	fail := func(err error) error {
		e.state.Store("serving")
		e.lastErr.Store(err.Error())
		return err
	}
	if verify, err = checkOld(ctx, e, old, verify); err != nil {
		return fail(err)
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
	if err := verifySwitch(ctx, e, old, h, sw.Warm, verify); err != nil {
		h.retire()
		return fail(err)
	}
	if _, ok := r.serve(e, h); !ok {
		h.retire()
		return fail(errIndexNotFound(name))
	}
	old.retire()
	e.state.Store("serving")
	e.lastErr.Store("")
	return nil
}

// switchSpec is the spec old changed by sw, and how many check queries
// the switch runs.
func (r *Registry) switchSpec(old LoadSpec, sw SwitchSpec) (LoadSpec, int, error) {
	change := engine.Change{Mode: sw.Mode, Backend: sw.Backend, CacheBytes: sw.CacheBytes, MemoryBudget: sw.MemoryBudget,
		EfSearch: sw.EfSearch, Semantics: sw.Semantics, Kernel: sw.Kernel, Compression: sw.Compression}
	spec := old
	spec.setEngineSpec(change.Apply(old.engineSpec()))
	if old.Mode == engine.ModeOnDisk && spec.Mode != engine.ModeOnDisk && spec.Rerank != nil && (spec.Rerank.VectorsPath == spec.Path || spec.Rerank.VectorsPath == spec.VectorsPath) {
		spec.Rerank = nil // on_disk's own rerank source goes with it
	}
	verify := defaultVerifyQueries
	if change.ChangesResults(old.engineSpec()) {
		verify = 0
	}
	if v := sw.VerifyQueries; v != nil {
		if *v < 0 || *v > r.limits.MaxVerifyQueries {
			return spec, 0, badRequest("verify_queries=%d is out of range [0, %d] (max_verify_queries)", *v, r.limits.MaxVerifyQueries)
		}
		verify = *v
	}
	return spec, verify, nil
}

// checkOld checks the old handle's file before the new handle opens, and
// returns how many check queries the switch still runs: none when the
// file changed (the old handle cannot answer; this switch is its reload).
// An object store that failed for good fails the switch: opening the
// object anew would wait as long again before failing the same way.
func checkOld(ctx context.Context, e *entry, old *handle, verify int) (int, error) {
	if old.failed.Load() != nil {
		return 0, nil
	}
	switch err := old.checkFileContext(ctx); {
	case isFileChanged(err):
		old.markFailed(err)
		return 0, nil
	case errors.Is(err, engine.ErrObjectStore):
		return verify, err
	case err != nil:
		if derr := switchDone(ctx, e); derr != nil {
			return verify, derr
		}
	}
	return verify, nil
}

// verifySwitch checks that h may replace old: the same shape, warm when
// asked, the same answers to verify check queries, and the switch not
// ended meanwhile (then why it ended, not what that caused).
func verifySwitch(ctx context.Context, e *entry, old, h *handle, warm bool, verify int) error {
	if err := sameShape(old, h); err != nil {
		return err
	}
	if warm {
		if err := h.x.WarmContext(ctx); err != nil {
			if derr := switchDone(ctx, e); derr != nil {
				return derr
			}
			return err
		}
	}
	if err := sameAnswers(ctx, func() error { return switchDone(ctx, e) }, old, h, verify); err != nil {
		if derr := switchDone(ctx, e); derr != nil {
			return derr // deleted or timed out meanwhile: say that, not what it caused
		}
		return err
	}
	return switchDone(ctx, e)
}

// switchDone reports why a switch must be abandoned now, if it must.
func switchDone(ctx context.Context, e *entry) error {
	switch {
	case e.deleted.Load():
		return errIndexNotFound(e.name)
	case ctx.Err() == nil:
		return nil
	}
	var ae *apiError
	switch cause := context.Cause(ctx); {
	case errors.As(cause, &ae): // shutting down
		return ae
	case errors.Is(cause, context.DeadlineExceeded):
		return errGatewayTimeout("switch_timeout", "switch abandoned: it did not finish within the switch timeout; the old mode keeps serving")
	default:
		return errConflict("switch_cancelled", "switch cancelled; the old mode keeps serving")
	}
}

// sameShape refuses a switch to a file that clients cannot query as before:
// another dimension, metric or vector type.
func sameShape(a, b *handle) error {
	x, y := a.x, b.x
	if x.Dim() != y.Dim() || x.Binary() != y.Binary() || x.Metric() != y.Metric() {
		return errConflict("index_shape_changed", fmt.Sprintf(
			"switch aborted: %s now holds d=%d %s (binary %v), the served index has d=%d %s (binary %v); load it under another name or DELETE first",
			b.spec.Path, y.Dim(), y.Metric(), y.Binary(), x.Dim(), x.Metric(), x.Binary()))
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
			return errConflict("switch_verification_failed", fmt.Sprintf("switch aborted: check query %d failed: old: %v, new: %v; the old mode keeps serving", i, ea, eb))
		}
		if !slices.Equal(ra, rb) {
			return errConflict("switch_verification_failed", fmt.Sprintf("switch aborted: check query %d gives different results in the new mode; the old mode keeps serving", i))
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
