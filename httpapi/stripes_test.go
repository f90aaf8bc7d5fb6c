package httpapi

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestUsersRetireWaitsForUsers: a retired handle closes exactly once, after
// its last user left, and admits no user afterwards — under concurrent
// enters and leaves on every stripe (run with -race).
func TestUsersRetireWaitsForUsers(t *testing.T) {
	for round := range 50 {
		var u users
		var inside, closes atomic.Int64
		var closedWhileInside atomic.Bool
		closeIt := func() {
			if inside.Load() != 0 {
				closedWhileInside.Store(true)
			}
			closes.Add(1)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					i, ok, last := u.enter()
					if last {
						closeIt()
					}
					if !ok {
						continue
					}
					inside.Add(1)
					inside.Add(-1)
					if u.leave(i) {
						closeIt()
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		if u.retire() {
			closeIt()
		}
		if _, ok, last := u.enter(); ok {
			t.Fatal("a retired handle admitted a user")
		} else if last {
			closeIt()
		}
		close(stop)
		wg.Wait()
		if closedWhileInside.Load() {
			t.Fatal("closed with a user inside")
		}
		if n := closes.Load(); n < 1 {
			t.Fatalf("round %d: never closed (users %d)", round, u.count())
		}
		if u.count() != 0 {
			t.Fatalf("round %d: %d users left", round, u.count())
		}
	}
}

// TestUsersLeaseOrder: the handle stays open while a lease is held and
// closes when it is released after retiring; not before.
func TestUsersLeaseOrder(t *testing.T) {
	var u users
	i, ok, _ := u.enter()
	if !ok {
		t.Fatal("enter failed on a live handle")
	}
	if u.retire() {
		t.Fatal("retire reported no users with one inside")
	}
	if !u.leave(i) {
		t.Fatal("the last user's leave did not report the handle unused")
	}
	var v users
	j, _, _ := v.enter()
	if v.leave(j) {
		t.Fatal("leaving a handle the registry still serves reported it unused")
	}
}

// TestQueryStatsAcrossStripes: counts and percentiles gather every stripe.
func TestQueryStatsAcrossStripes(t *testing.T) {
	var q queryStats
	for i := range 100 {
		q.ok(uint32(i%nStripes), time.Duration(i+1)*time.Millisecond, 2)
	}
	q.failed(3)
	q.failed(5)
	if q.queries() != 200 || q.errors() != 2 {
		t.Fatalf("queries %d errors %d, want 200 and 2", q.queries(), q.errors())
	}
	p := q.percentiles(0.5, 0.99, 0)
	if p[0] != 51 || p[1] != 100 || p[2] != 1 {
		t.Errorf("percentiles %v, want [51 100 1] ms", p)
	}
	// More than a ring's worth on one stripe: only the last latRing stay.
	var r queryStats
	for i := range latRing + 10 {
		r.ok(0, time.Duration(i)*time.Microsecond, 1)
	}
	if p := r.percentiles(0); p[0] != 0.01 {
		t.Errorf("oldest kept latency %v ms, want 0.01 (the first 10 overwritten)", p[0])
	}
}

// TestHistogramSnapshot: buckets are Prometheus's "le" (a value on a bound
// counts in it), cumulative, over every stripe, with the sum in seconds.
func TestHistogramSnapshot(t *testing.T) {
	h := newHistogram([]float64{0.001, 0.002, 0.004})
	for i, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond} {
		h.observe(uint32(i*3%nStripes), d)
	}
	n, sum, cum := h.snapshot()
	if n != 4 || sum < 0.01449 || sum > 0.01451 {
		t.Errorf("count %d sum %v, want 4 and 0.0145", n, sum)
	}
	want := map[float64]uint64{0.001: 2, 0.002: 2, 0.004: 3}
	for b, c := range want {
		if cum[b] != c {
			t.Errorf("le=%v: %d, want %d (all: %v)", b, cum[b], c, cum)
		}
	}
}
