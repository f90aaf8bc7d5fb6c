package httpapi

import (
	"context"
	"fmt"
	"time"
)

// fileCheckInterval is how often served files are compared with what was
// opened (a replaced file is otherwise only seen by the queries' checks).
const fileCheckInterval = time.Second

// watchFiles marks failed every served index whose file changed, until the
// server closes.
//
// Its checks give up when the server closes: a HEAD to a stalled store
// holds the index's handle, which Close would wait for.
func (s *Server) watchFiles() {
	t := time.NewTicker(fileCheckInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for name, e := range s.Reg.all() {
			// Each check on its own: a HEAD to a stalled object store
			// must not hold up the checks of local files.
			if e.checking.CompareAndSwap(false, true) {
				go func() {
					defer e.checking.Store(false)
					s.checkFile(ctx, name, e)
				}()
			}
		}
	}
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
