package httpapi

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// fileCheckInterval is how often the watcher checks the served files it
// cannot watch (objects, files on network file systems, any file outside
// Linux): each is compared with what was opened every interval.
const fileCheckInterval = time.Second

// sweepInterval is how often a watched file is compared with its path
// besides: what inotify does not report (a file system mounted over its
// path, a write through another process's shared mapping that has not
// closed the file yet).
const sweepInterval = 30 * time.Second

// watcher marks failed every served index whose file changed, until the
// server closes. Local files on Linux are watched (inotify): the file
// itself (written, truncated, removed, renamed or renamed over, its times
// or permissions changed) and each directory on its path (renamed or
// removed), and an index is checked as soon as one of them reports a
// change; every watched file is also checked once a sweepInterval. The
// others are checked every fileCheckInterval. A check is the handle's
// CheckFile, which decides, and logs, whether the file changed.
type watcher struct {
	s   *Server
	n   *notifier       // nil: none (another OS, or inotify refused)
	ctx context.Context // ends when the server closes

	mu      sync.Mutex
	targets map[int32]map[*entry]int // by watch descriptor: the entries it serves, and how many of their watches it is
	recs    map[*handle]*watchRec    // the serving handles the watcher knows
	gen     uint64                   // the registry generation recs were made at
	stale   bool                     // a watch was dropped: recs are rebuilt at the next tick
	polled  []*watchRec              // checked every tick
	swept   []*watchRec              // watched: checked every sweepInterval
	next    int                      // the next of swept to check
	owed    float64                  // sweep checks due
}

// watchRec is what the watcher holds for one serving handle.
type watchRec struct {
	e       *entry
	wds     []int32 // its watches, one per file and directory
	watched bool    // every file it serves is watched, with every directory on the way
}

// newWatcher is s's watcher, with a notifier where the system gives one.
func newWatcher(s *Server) *watcher {
	w := &watcher{s: s, targets: map[int32]map[*entry]int{}, recs: map[*handle]*watchRec{}}
	if n, err := newNotifier(); err == nil {
		w.n = n
	} else {
		s.log.Debug("served files are checked every second: no file notifications", "error", err.Error())
	}
	return w
}

// run runs the watcher until the server closes. Its checks give up when
// the server closes: a HEAD to a stalled store holds the index's handle,
// which Close would wait for.
func (w *watcher) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.ctx = ctx
	if n := w.n; n != nil {
		defer n.close()
		go func() {
			if n.run(w.changed, w.gone, w.lost) {
				w.unnotified()
			}
		}()
	}
	t := time.NewTicker(fileCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-w.s.stop:
			return
		case <-t.C:
		}
		w.tick()
	}
}

// tick follows the registry's changes, then checks the unwatched files
// and the sweep's share of the watched ones.
func (w *watcher) tick() {
	if gen := w.s.Reg.gen.Load(); gen != w.gen || w.stale {
		w.reconcile(gen)
	}
	w.mu.Lock()
	due := slices.Clone(w.polled)
	if n := len(w.swept); n > 0 {
		w.owed = min(w.owed+float64(n)*float64(fileCheckInterval)/float64(sweepInterval), float64(n))
		for ; w.owed >= 1; w.owed-- {
			w.next %= n
			due = append(due, w.swept[w.next])
			w.next++
		}
	}
	w.mu.Unlock()
	for _, rec := range due {
		w.check(rec.e)
	}
}

// reconcile watches the handles that serve since the last call and lets
// go of those that no longer do; gen is the registry's generation, read
// before its entries.
func (w *watcher) reconcile(gen uint64) {
	serving := map[*handle]*entry{}
	for _, e := range w.s.Reg.all() {
		if h := e.cur.Load(); h != nil {
			serving[h] = e
		}
	}
	var fresh []*entry
	w.mu.Lock()
	for h, e := range serving { // first: a switch's new handle takes over the old one's watches
		if rec := w.recs[h]; rec == nil || !rec.watched && w.stale {
			if rec != nil {
				w.unwatch(rec)
			}
			w.recs[h] = w.watch(h, e)
			fresh = append(fresh, e)
		}
	}
	for h, rec := range w.recs {
		if serving[h] != rec.e {
			w.unwatch(rec)
			delete(w.recs, h)
		}
	}
	w.polled, w.swept = w.polled[:0], w.swept[:0]
	for _, rec := range w.recs {
		if rec.watched {
			w.swept = append(w.swept, rec)
		} else {
			w.polled = append(w.polled, rec)
		}
	}
	w.gen, w.stale = gen, false
	w.mu.Unlock()
	for _, e := range fresh { // a change between the open and the watch
		w.check(e)
	}
}

// watch watches h's local files and the directories on their paths (w.mu
// held).
func (w *watcher) watch(h *handle, e *entry) *watchRec {
	rec := &watchRec{e: e, watched: w.n != nil}
	sp := h.x.Spec()
	paths := []string{sp.Path, sp.VectorsPath}
	if sp.Rerank != nil {
		paths = append(paths, sp.Rerank.Path)
	}
	var seen []string
	for _, p := range paths {
		switch {
		case p == "" || slices.Contains(seen, p):
			continue
		case engine.IsRemote(p) || w.n == nil || !localFS(p):
			rec.watched = false
			continue
		}
		seen = append(seen, p)
		for dir, q := false, p; ; dir, q = true, filepath.Dir(q) {
			wd, err := w.n.add(q, dir)
			if err != nil {
				// The file itself unwatched (the kernel's limit on
				// watches): checked every tick. A directory the server
				// may not read: the sweep sees it renamed.
				rec.watched = rec.watched && dir
				break
			}
			if w.targets[wd] == nil {
				w.targets[wd] = map[*entry]int{}
			}
			w.targets[wd][e]++
			rec.wds = append(rec.wds, wd)
			if q == filepath.Dir(q) {
				break
			}
		}
	}
	return rec
}

// unwatch lets go of rec's watches (w.mu held).
func (w *watcher) unwatch(rec *watchRec) {
	for _, wd := range rec.wds {
		users := w.targets[wd]
		if users == nil {
			continue // dropped by the kernel (gone)
		}
		if users[rec.e]--; users[rec.e] <= 0 {
			delete(users, rec.e)
		}
		if len(users) == 0 {
			delete(w.targets, wd)
			if w.n != nil {
				w.n.remove(wd)
			}
		}
	}
	rec.wds = nil
}

// changed checks the indexes whose file, or a directory on whose path,
// reported a change.
func (w *watcher) changed(wd int32) {
	w.mu.Lock()
	es := make([]*entry, 0, len(w.targets[wd]))
	for e := range w.targets[wd] {
		es = append(es, e)
	}
	w.mu.Unlock()
	for _, e := range es {
		w.check(e)
	}
}

// gone: the kernel dropped watch wd (its file system unmounted, its
// directory removed); its indexes are checked, then checked every tick.
func (w *watcher) gone(wd int32) {
	w.mu.Lock()
	users := w.targets[wd]
	delete(w.targets, wd)
	for _, rec := range w.recs {
		if users[rec.e] > 0 {
			rec.watched = false
			w.stale = true
		}
	}
	w.mu.Unlock()
	for e := range users {
		w.check(e)
	}
}

// unnotified: the notifier failed; from the next tick on every file is
// checked every tick, and every index now.
func (w *watcher) unnotified() {
	w.mu.Lock()
	w.n, w.stale = nil, true
	for _, rec := range w.recs {
		rec.watched = false
	}
	w.mu.Unlock()
	w.lost()
}

// lost: events were dropped; every index is checked.
func (w *watcher) lost() {
	w.mu.Lock()
	es := make([]*entry, 0, len(w.recs))
	for _, rec := range w.recs {
		es = append(es, rec.e)
	}
	w.mu.Unlock()
	for _, e := range es {
		w.check(e)
	}
}

// check checks e's files in a goroutine of its own (a HEAD to a stalled
// object store must not hold up the others), at once unless a check of e
// is running: that one then checks again when it ends, so a change
// reported during a check is never left to the next sweep.
func (w *watcher) check(e *entry) {
	e.recheck.Store(true)
	if !e.checking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			for e.recheck.Swap(false) {
				w.s.checkFile(w.ctx, e.name, e)
			}
			e.checking.Store(false)
			if !e.recheck.Load() || !e.checking.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// checkFile compares e's served file with what was opened, marking the
// handle failed when it changed; a check that could not tell (an object
// store that did not answer) is logged and the handle keeps serving.
func (s *Server) checkFile(ctx context.Context, name string, e *entry) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic checking a served file", "index", name, "panic", fmt.Sprint(p))
		}
	}()
	_, l, err := s.Reg.acquire(name)
	if err != nil || l.h.failed.Load() != nil {
		if err == nil {
			l.release()
		}
		return
	}
	defer l.release()
	switch err := l.h.checkFileContext(ctx); {
	case err == nil:
	case ctx.Err() != nil: // the server is closing
	case !isFileChanged(err):
		s.log.Warn("could not check a served file", "index", name, "path", l.h.spec.Path, "error", err.Error())
	case l.h.markFailed(err):
		s.log.Error("index file changed under a served index; searches answer 503 until it is reloaded or switched",
			"index", name, "path", l.h.spec.Path, "error", err.Error(), "detail", changeDetail(err))
	}
}
