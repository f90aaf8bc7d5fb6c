package distance

// L2Fast and IPFast are the fast kernels: they reassociate the sum (SIMD on
// amd64 with AVX2+FMA, four accumulators elsewhere), so results may differ
// from the exact kernels in the last bits. Chosen once per index.
var (
	L2Fast  func(q []float32, x []byte) float32 = l2Go4
	IPFast  func(q []float32, x []byte) float32 = ipGo4
	L2FastF func(q, x []float32) float32        = l2Go4F
	IPFastF func(q, x []float32) float32        = ipGo4F
	// MinSlot2 returns the highest index i with ids[i] ≠ −1 whose dis[i] is
	// the smallest among those slots (−1 when there is none), the choice
	// FAISS's candidate pool makes in pop_min, and a runner-up: another
	// such slot whose distance is the smallest of the rest (−1 when none).
	// ok is false when one of those slots holds a NaN, where callers must
	// follow FAISS's scan step by step.
	MinSlot2 func(dis []float32, ids []int32) (slot, runner int, ok bool) = minSlot2Go
	// FastImpl names the implementation in use ("avx512", "avx2" or "go").
	FastImpl = "go"
)

// SetAVX512 turns the AVX-512 float kernels on (where the CPU has AVX-512 F
// and DQ) or off (the AVX2 kernels, whose bits they equal), and returns
// FastImpl. They are on by default, off in builds with -tags noavx512. It
// changes process-wide state: call it at start-up, before any search (a
// program may read its own switch, e.g. cmd/faiss-sidecar reads
// FAISS_SIDECAR_NO_AVX512). Without the amd64 assembly it does nothing.
func SetAVX512(on bool) string {
	setAVX512(on)
	return FastImpl
}

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
