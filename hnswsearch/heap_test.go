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
			n = simdPool + r.IntN(12) // the SIMD path
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
			id, d0 := c.popMin()
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
