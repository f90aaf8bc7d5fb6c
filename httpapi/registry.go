package httpapi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// Registry holds the served indexes and the node-wide memory budget.
type Registry struct {
	roots []string // data roots, symlinks resolved
	given []string // data roots as configured (absolute), for the check before any lookup
	// buckets are the S3 buckets whose objects may be served (allowBuckets).
	buckets []string
	budget  int64 // bytes; 0 = unlimited
	// total is the machine's memory, or its cgroup's limit, as the server
	// read it at start (0: the engine reads it at each load).
	total  int64
	limits Limits
	// guideDir holds on_disk guide files ("": beside each index);
	// remoteGuideDir an s3:// index's when guideDir is "".
	guideDir, remoteGuideDir string
	// cacheDir is the disk cache of s3:// indexes: its path, and the
	// directory every load shares (nil: none).
	cacheDir  string
	cacheOpen *engine.CacheDir
	// env is the process's S3 client and kernels, given to every load.
	env *engine.Env

	// entries are the served names, those being loaded included: a lookup
	// takes no lock (a read lock writes a counter every core shares, on
	// every request), and a load or delete changes one name, not a copy of
	// them all. aliases maps an alias to its indexes, sorted by name (an
	// alias has at least one), and is never changed in place. mu
	// serialises their changes; ver counts those that take an index or an
	// alias away, odd while one is under way, so that a search can tell
	// that what it resolved is of one moment (served).
	mu      sync.Mutex
	entries cowMap[*entry]
	aliases atomic.Pointer[map[string][]string]
	ver     atomic.Uint64
	// memMu serialises budget checks with the reservations they make, and
	// with the changes of held and of the serving handles' resident bytes.
	memMu sync.Mutex
	// reserved is what admitted opens hold until their handle counts it;
	// held is the sum of resident over the handles that serve (serve),
	// so a load's budget check does not walk every index.
	reserved, held atomic.Int64
	// files is the descriptors the open and opening handles hold
	// (admitFiles; a handle gives its back when it closes).
	files atomic.Int64
	// gen counts the changes of serving handles (serve), for the file
	// watcher to follow.
	gen atomic.Uint64
	// shrunk is set (under memMu) when admit shrank a cache, until regrow
	// finds every cache back at its size at open.
	shrunk bool
	// base ends at the end of a shutdown's grace period (Server.Serve),
	// with errShuttingDown as its cause: loads, switches and warm-ups
	// then give up (nil before a server serves).
	base atomic.Pointer[context.Context]
}

// NewRegistry serves indexes from files under roots within budget bytes
// (with no root, every local path is refused: a server of S3 objects).
func NewRegistry(roots []string, budget int64) (*Registry, error) {
	r := &Registry{budget: budget, limits: Limits{}.withDefaults(0)}
	r.aliases.Store(&map[string][]string{})
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

func (r *Registry) get(name string) *entry {
	e, _ := r.entries.load(name)
	return e
}

// all is the served indexes by name; read-only.
func (r *Registry) all() map[string]*entry { return r.entries.all() }

// served is what a search resolves its targets in: the aliases of one
// moment, the indexes as the registry serves them (looked up when asked
// for), and the version both were read at. They are of one moment as long
// as no index or alias has been taken away since (current): a load adds a
// name, which changes no answer before it serves.
type served struct {
	r       *Registry
	ver     uint64
	aliases map[string][]string
}

// snapshot is what the registry serves now, indexes and aliases; read-only.
func (r *Registry) snapshot() served {
	v := r.ver.Load()
	for v&1 != 0 { // a change under way, for as long as a few map writes
		runtime.Gosched()
		v = r.ver.Load()
	}
	return served{r: r, ver: v, aliases: *r.aliases.Load()}
}

// current reports whether nothing was taken away since sv was taken.
func (sv *served) current() bool { return sv.r.ver.Load() == sv.ver }

// entry is the index, or the load under way, named name.
func (sv *served) entry(name string) (*entry, bool) { return sv.r.entries.load(name) }

// entries is every index and load under way, by name; read-only.
func (sv *served) entries() map[string]*entry { return sv.r.all() }

// removing brackets a change that takes indexes or aliases away (r.mu
// held): ver is odd until the returned func runs.
func (r *Registry) removing() (done func()) {
	r.ver.Add(1)
	return func() { r.ver.Add(1) }
}

// setLocked serves e under name, or stops serving name when e is nil,
// taking it out of its aliases in the same step (r.mu held).
func (r *Registry) setLocked(name string, e *entry) {
	if e != nil {
		r.entries.store(name, e)
		return
	}
	defer r.removing()()
	r.entries.remove(name)
	if next := withoutIndex(*r.aliases.Load(), name); next != nil {
		r.aliases.Store(&next)
	}
}

// acquire returns the handle serving name with a lease on it.
func (r *Registry) acquire(name string) (*entry, lease, error) {
	e := r.get(name)
	if e == nil {
		return nil, lease{}, errIndexNotFound(name)
	}
	l, err := e.lease()
	return e, l, err
}

// Delete stops serving name at once, cancelling a switch in progress, and
// waits (up to wait) for its in-flight queries before the handle closes.
// It never waits for a load or switch.
func (r *Registry) Delete(name string, wait time.Duration) error {
	r.mu.Lock()
	e := r.get(name)
	ok := e != nil
	if ok {
		r.setLocked(name, nil)
		e.deleted.Store(true)
	}
	r.mu.Unlock()
	if !ok {
		return errIndexNotFound(name)
	}
	r.unload(e, wait)
	return nil
}

// unload ends e, already taken out of the served set and marked deleted: a
// switch in progress is cancelled, and the handle closes after its
// in-flight queries (unload waits for them up to wait).
func (r *Registry) unload(e *entry, wait time.Duration) {
	e.cancelSwitch()
	e.end(errIndexNotFound(e.name))
	if h, _ := r.serve(e, nil); h != nil {
		h.retire()
		deadline := time.Now().Add(wait)
		for h.users.count() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	r.regrow()
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
