package distance

// Kernels are the fast kernels of one implementation: they reassociate the
// sum (SIMD on amd64 with AVX2+FMA, four accumulators elsewhere), so
// results may differ from the exact kernels in the last bits. Fast chooses
// them; an index binds them once, when it opens.
type Kernels struct {
	// L2 is Σ (q[j] − x[j])² and IP is Σ q[j]·x[j], x holding len(q)
	// little-endian float32 values.
	L2, IP func(q []float32, x []byte) float32
	// L2F and IPF are L2 and IP over decoded float32 vectors.
	L2F, IPF func(q, x []float32) float32
	// Impl names the implementation: "avx512", "avx2" or "go".
	Impl string
}

// Fast returns the fast kernels for this CPU: on amd64 with AVX2 and FMA
// the assembly, with 64-byte loads (bit-identical to the AVX2 kernels)
// when avx512 is set, the CPU has AVX-512 F and DQ and the build has no
// noavx512 tag; the Go kernels elsewhere. The choice is the caller's
// (cmd/faiss-sidecar reads FAISS_SIDECAR_NO_AVX512), never process-wide.
func Fast(avx512 bool) Kernels { return fast(avx512) }

// goKernels are the fast kernels without assembly.
func goKernels() Kernels { return Kernels{L2: l2Go4, IP: ipGo4, L2F: l2Go4F, IPF: ipGo4F, Impl: "go"} }

// MinSlot2 returns the highest index i with ids[i] ≠ −1 whose dis[i] is
// the smallest among those slots (−1 when there is none), the choice
// FAISS's candidate pool makes in pop_min, and a runner-up: another such
// slot whose distance is the smallest of the rest (−1 when none). ok is
// false when one of those slots holds a NaN, where callers must follow
// FAISS's scan step by step. It uses AVX2 where the CPU has it (fixed at
// start: no choice to pass down, the answers are the same).
func MinSlot2(dis []float32, ids []int32) (slot, runner int, ok bool) { return minSlot2(dis, ids) }

// minSlot2 is MinSlot2's implementation, chosen at init by CPU feature
// and never changed: one indirect call, as inlined into the caller.
var minSlot2 = minSlot2Go

func l2Go4(q []float32, x []byte) float32 {
	x = x[:4*len(q)]
	var a0, a1, a2, a3 float32
	j := 0
	for ; j+4 <= len(q); j += 4 {
		t0, t1, t2, t3 := q[j]-f32(x, j), q[j+1]-f32(x, j+1), q[j+2]-f32(x, j+2), q[j+3]-f32(x, j+3)
		a0 += t0 * t0
		a1 += t1 * t1
		a2 += t2 * t2
		a3 += t3 * t3
	}
	for ; j < len(q); j++ {
		t := q[j] - f32(x, j)
		a0 += t * t
	}
	return (a0 + a1) + (a2 + a3)
}

func ipGo4(q []float32, x []byte) float32 {
	x = x[:4*len(q)]
	var a0, a1, a2, a3 float32
	j := 0
	for ; j+4 <= len(q); j += 4 {
		a0 += q[j] * f32(x, j)
		a1 += q[j+1] * f32(x, j+1)
		a2 += q[j+2] * f32(x, j+2)
		a3 += q[j+3] * f32(x, j+3)
	}
	for ; j < len(q); j++ {
		a0 += q[j] * f32(x, j)
	}
	return (a0 + a1) + (a2 + a3)
}

func l2Go4F(q, x []float32) float32 {
	x = x[:len(q)]
	var a0, a1, a2, a3 float32
	j := 0
	for ; j+4 <= len(q); j += 4 {
		t0, t1, t2, t3 := q[j]-x[j], q[j+1]-x[j+1], q[j+2]-x[j+2], q[j+3]-x[j+3]
		a0 += t0 * t0
		a1 += t1 * t1
		a2 += t2 * t2
		a3 += t3 * t3
	}
	for ; j < len(q); j++ {
		t := q[j] - x[j]
		a0 += t * t
	}
	return (a0 + a1) + (a2 + a3)
}

func ipGo4F(q, x []float32) float32 {
	x = x[:len(q)]
	var a0, a1, a2, a3 float32
	j := 0
	for ; j+4 <= len(q); j += 4 {
		a0 += q[j] * x[j]
		a1 += q[j+1] * x[j+1]
		a2 += q[j+2] * x[j+2]
		a3 += q[j+3] * x[j+3]
	}
	for ; j < len(q); j++ {
		a0 += q[j] * x[j]
	}
	return (a0 + a1) + (a2 + a3)
}

func minSlot2Go(dis []float32, ids []int32) (int, int, bool) {
	ids = ids[:len(dis)]
	best, second := -1, -1
	var bd, sd float32
	for i := len(dis) - 1; i >= 0; i-- {
		if ids[i] == -1 {
			continue
		}
		d := dis[i]
		switch {
		case d != d:
			return -1, -1, false
		case best < 0 || d < bd:
			second, sd = best, bd
			best, bd = i, d
		case second < 0 || d < sd:
			second, sd = i, d
		}
	}
	return best, second, true
}
