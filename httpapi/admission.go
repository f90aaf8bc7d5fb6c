package httpapi

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

// admission bounds the searches in flight: a slot each, a bounded queue of
// requests waiting for one, and load shed past that (429 + Retry-After)
// rather than goroutines and bodies piling up without limit.
type admission struct {
	slots   chan struct{}
	waiting atomic.Int64
	maxWait int64
}

func newAdmission(slots, queue int) *admission {
	return &admission{slots: make(chan struct{}, slots), maxWait: int64(queue)}
}

// indexAdmission is an index's share of the server's search slots and
// queue l: three quarters of each (at least one slot).
func indexAdmission(l Limits) *admission {
	return newAdmission(max(1, l.MaxConcurrentSearches*3/4), l.MaxQueuedSearches*3/4)
}

// errOverloaded is the shed-load answer; fail adds Retry-After to it.
var errOverloaded = errTooMany("too_many_requests", "too many searches in flight; retry later")

// enter takes a slot, waiting in the queue until ctx ends or deadline.
func (a *admission) enter(ctx context.Context, deadline time.Time) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	if a.waiting.Add(1) > a.maxWait {
		a.waiting.Add(-1)
		return errOverloaded
	}
	defer a.waiting.Add(-1)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errOverloaded
	case <-t.C:
		return errOverloaded
	}
}

// tryEnter takes a slot only if one is free (an _msearch's extra workers).
func (a *admission) tryEnter() bool {
	select {
	case a.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (a *admission) exit() { <-a.slots }

// budget is a count of bytes or work shared by the requests in flight.
type budget struct {
	used atomic.Int64
	max  int64
}

// take charges n, or reports false (charging nothing) when that would go
// past max.
func (b *budget) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *budget) give(n int64) { b.used.Add(-n) }

// fits reports whether n more would fit now (charging nothing).
func (b *budget) fits(n int64) bool { return b.used.Load()+n <= b.max }

// charge is what a running search holds of the shared work bounds: its
// work in max_work_in_flight and, when heavy, a place in the heavy lane.
type charge struct {
	work  int64
	heavy bool
}

// checkWork refuses a request of n queries of plan qp that would exceed
// MaxRequestWork, sheds it when max_work_in_flight is reached, and puts a
// heavy plan (one query's effort ≥ HeavyQueryWork) in the heavy lane,
// waiting there until deadline. The caller gives the charge back with
// uncharge.
func (s *Server) checkWork(ctx context.Context, qp queryPlan, n int, deadline time.Time) (charge, error) {
	w := qp.Work() * int64(n)
	if w > s.limits.MaxRequestWork {
		return charge{}, badRequest("request asks for %d queries × max(k, shortlist or radial cap, ef_search) %d = %d, above the limit of %d (max_request_work)",
			n, qp.Work(), w, s.limits.MaxRequestWork)
	}
	return s.takeWork(ctx, w, qp.Effort(), deadline)
}

// takeWork charges work w (within MaxRequestWork, checked by the caller)
// to max_work_in_flight, shedding the request when that is reached, and
// puts it in the heavy lane when its heaviest query's effort is at least
// HeavyQueryWork, waiting there until deadline.
func (s *Server) takeWork(ctx context.Context, w, effort int64, deadline time.Time) (charge, error) {
	if !s.workMem.take(w) {
		return charge{}, errWorkBusy
	}
	ch := charge{work: w}
	if effort >= s.limits.HeavyQueryWork {
		if err := s.heavy.enter(ctx, deadline); err != nil {
			s.workMem.give(w)
			return charge{}, errHeavyBusy
		}
		ch.heavy = true
	}
	return ch, nil
}

// uncharge gives back what checkWork charged.
func (s *Server) uncharge(ch charge) {
	s.workMem.give(ch.work)
	if ch.heavy {
		s.heavy.exit()
	}
}

// errWorkBusy sheds a request whose work would take the requests in flight
// past max_work_in_flight.
var errWorkBusy = errTooMany("too_many_requests", "too much search work in flight (max_work_in_flight); retry later")

// errHeavyBusy sheds a heavy search when the heavy lane and its queue are
// full.
var errHeavyBusy = errTooMany("too_many_requests", "too many heavy searches in flight (a query's work of at least heavy_query_work; max_heavy_searches run at once); retry later")

// retryAfter is the Retry-After a shed request is given, in seconds.
const retryAfter = "1"

// setRetryAfter tells a shed client when to come back.
func setRetryAfter(w http.ResponseWriter, err error) {
	if err == errOverloaded || err == errBodiesBusy || err == errWorkBusy || err == errHeavyBusy {
		w.Header().Set("Retry-After", retryAfter)
	}
}
