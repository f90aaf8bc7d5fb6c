package hnswsearch

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAtLeastBelow: the popped-slot shortcut answers exactly as the full
// count_below scan, over random pushes and pops (ties, +Inf and NaN
// included), with both pool behaviours.
func TestAtLeastBelow(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	vals := []float32{0, 1, 1, 2, 3, float32(math.Inf(1)), float32(math.NaN())}
	for trial := range 4000 {
		var c pool
		n := 1 + r.IntN(12)
		if trial%2 == 0 {
			n = 64 + r.IntN(200) // pools of ef 64 to 256
		}
		c.reset(n, trial%2 == 0)
		for step := range 60 {
			if r.IntN(3) > 0 || c.size() == 0 {
				d := vals[r.IntN(len(vals))]
				if r.IntN(2) == 0 {
					d = r.Float32() * 4
				}
				c.push(int32(step), d)
				continue
			}
			id, d0, _ := c.popMin()
			if id < 0 {
				continue
			}
			for bound := -1; bound <= n+1; bound++ {
				if got, want := c.atLeastBelow(d0, bound), c.countBelow(d0) >= bound; got != want {
					t.Fatalf("trial %d step %d: atLeastBelow(%v, %d) = %v, count_below %d (popped %d, pool %v %v)",
						trial, step, d0, bound, got, c.countBelow(d0), c.popped, c.dis[:c.k], c.ids[:c.k])
				}
			}
		}
	}
}

// TestPopMinMatchesLiteral: popMin pops what FAISS's literal scan pops
// (ties, +Inf and NaN included) at every pool size, and its next hint, when
// given, is a valid entry whose distance none left undercuts.
func TestPopMinMatchesLiteral(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	negZero := float32(math.Copysign(0, -1))
	vals := []float32{0, negZero, -1, 1, 1, 2, 3, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	hints := 0
	for trial := range 4000 {
		var c, lit pool
		n := 1 + r.IntN(40)
		if trial%3 == 0 {
			n = 64 + r.IntN(200)
		}
		c.reset(n, trial%2 == 0)
		lit.reset(n, trial%2 == 0)
		for step := range 80 {
			if r.IntN(3) > 0 || c.size() == 0 {
				d := vals[r.IntN(len(vals))]
				if r.IntN(2) == 0 || trial%5 == 0 {
					d = r.Float32() * 4
				}
				c.push(int32(step), d)
				lit.push(int32(step), d)
				continue
			}
			id, d0, next := c.popMin()
			wid, wd := lit.popMinLiteral()
			if id != wid || (id >= 0 && d0 != wd && !(d0 != d0 && wd != wd)) {
				t.Fatalf("trial %d step %d: popMin = (%d, %v), literal scan (%d, %v)", trial, step, id, d0, wid, wd)
			}
			if next < 0 {
				continue
			}
			hints++
			var dn float32
			found := false
			for i := range c.k {
				if c.ids[i] == next {
					dn, found = c.dis[i], true
				}
			}
			if !found {
				t.Fatalf("trial %d step %d: hint %d is not a valid entry", trial, step, next)
			}
			for i := range c.k {
				if c.ids[i] != -1 && c.dis[i] < dn {
					t.Fatalf("trial %d step %d: hint %d at %v, but %d at %v is left", trial, step, next, dn, c.ids[i], c.dis[i])
				}
			}
		}
	}
	if hints == 0 {
		t.Fatal("popMin never gave a hint")
	}
}
