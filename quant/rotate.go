package quant

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// rotator is a random orthogonal transform of R^d in O(d log d) time and
// O(d) memory: rounds of a random sign flip then a normalized
// Walsh–Hadamard transform on the first m = 2^⌊log₂d⌋ coordinates and, when
// d is not a power of two, another sign flip and transform on the last m
// (the two blocks overlap, so every coordinate mixes with every other).
// A dense d×d matrix would cost 16 GiB at d = 65536. Each step is
// orthogonal, so norms and inner products are preserved exactly (up to
// float32 rounding).
type rotator struct {
	d, m   int
	rounds int
	// signs holds 2·rounds flips of d bits each (the second of a round is
	// unused when d = m), each padded to whole 64-bit words.
	signs []uint64
}

// rotationRounds: 3 rounds is the usual count for randomized Hadamard
// rotations of power-of-two size; with overlapping blocks two rounds
// already apply four transforms.
func rotationRounds(d int) int {
	if d&(d-1) == 0 {
		return 3
	}
	return 2
}

func newRotator(d int, seed uint64) *rotator {
	r := &rotator{d: d, m: 1 << (bits.Len(uint(d)) - 1), rounds: rotationRounds(d)}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r.signs = make([]uint64, 2*r.rounds*words(d))
	for i := range r.signs {
		r.signs[i] = rng.Uint64()
	}
	r.maskPad()
	return r
}

// maskPad clears the bits past d in each flip (so a file's sign bytes have
// one canonical form).
func (r *rotator) maskPad() {
	w := words(r.d)
	if rem := r.d % 64; rem != 0 {
		for i := w - 1; i < len(r.signs); i += w {
			r.signs[i] &= 1<<rem - 1
		}
	}
}

func (r *rotator) signBytes() int { return 8 * len(r.signs) }

func (r *rotator) flip(x []float32, k int) {
	w := words(r.d)
	s := r.signs[k*w : (k+1)*w]
	for j := range x {
		if s[j>>6]>>(j&63)&1 != 0 {
			x[j] = -x[j]
		}
	}
}

// apply rotates x (len d) in place.
func (r *rotator) apply(x []float32) {
	x = x[:r.d]
	scale := float32(1 / math.Sqrt(float64(r.m)))
	for k := range r.rounds {
		r.flip(x, 2*k)
		fwht(x[:r.m], scale)
		if r.m < r.d {
			r.flip(x, 2*k+1)
			fwht(x[r.d-r.m:], scale)
		}
	}
}

// fwht is the in-place Walsh–Hadamard transform of x (power-of-two
// length), multiplied by scale (1/√len makes it orthogonal).
func fwht(x []float32, scale float32) {
	n := len(x)
	for h := 1; h < n; h <<= 1 {
		for i := 0; i < n; i += 2 * h {
			a := x[i : i+h]
			b := x[i+h : i+2*h]
			for j := range a {
				u, v := a[j], b[j]
				a[j], b[j] = u+v, u-v
			}
		}
	}
	for j := range x {
		x[j] *= scale
	}
}

func bitsLen(d int) int { return bits.Len(uint(d)) }
