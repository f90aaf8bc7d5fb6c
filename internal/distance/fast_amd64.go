//go:build !purego

package distance

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// On amd64 with AVX2 and FMA the fast kernels are the avo-generated
// assembly in kernels_amd64.s (regenerate with internal/distance/asm).
// Build with -tags purego for the Go kernels.
//
// Where the CPU has AVX-512 (F and DQ) the two float kernels can use
// 64-byte loads, with results bit-identical to the AVX2 kernels, so a
// search returns the same distances on either kind of machine. Fast(false),
// or building with -tags noavx512, keeps AVX2.

// simd reports whether the CPU runs the AVX2+FMA assembly: read once at
// start, never changed.
var simd = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func init() {
	if simd {
		minSlot2 = minSlot2SIMD
	}
}

func fast(avx512 bool) Kernels {
	switch {
	case !simd:
		return goKernels()
	case avx512 && avx512Build && hasAVX512():
		return Kernels{L2: l2BytesAVX512, IP: ipBytesAVX512, L2F: l2FloatsAVX512, IPF: ipFloatsAVX512, Impl: "avx512"}
	}
	return Kernels{L2: l2BytesAVX2, IP: ipBytesAVX2, L2F: l2FloatsAVX2, IPF: ipFloatsAVX2, Impl: "avx2"}
}

func hasAVX512() bool {
	c := cpu.X86
	return c.HasAVX512F && c.HasAVX512DQ
}

// The kernels in Kernels' signatures: each calls its assembly directly.

func l2BytesAVX2(q []float32, x []byte) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:4*len(q)]
	return l2AVX2((*byte)(unsafe.Pointer(&q[0])), &x[0], len(q))
}

func ipBytesAVX2(q []float32, x []byte) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:4*len(q)]
	return ipAVX2((*byte)(unsafe.Pointer(&q[0])), &x[0], len(q))
}

func l2FloatsAVX2(q, x []float32) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:len(q)]
	return l2AVX2((*byte)(unsafe.Pointer(&q[0])), (*byte)(unsafe.Pointer(&x[0])), len(q))
}

func ipFloatsAVX2(q, x []float32) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:len(q)]
	return ipAVX2((*byte)(unsafe.Pointer(&q[0])), (*byte)(unsafe.Pointer(&x[0])), len(q))
}

func l2BytesAVX512(q []float32, x []byte) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:4*len(q)]
	return l2AVX512((*byte)(unsafe.Pointer(&q[0])), &x[0], len(q))
}

func ipBytesAVX512(q []float32, x []byte) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:4*len(q)]
	return ipAVX512((*byte)(unsafe.Pointer(&q[0])), &x[0], len(q))
}

func l2FloatsAVX512(q, x []float32) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:len(q)]
	return l2AVX512((*byte)(unsafe.Pointer(&q[0])), (*byte)(unsafe.Pointer(&x[0])), len(q))
}

func ipFloatsAVX512(q, x []float32) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:len(q)]
	return ipAVX512((*byte)(unsafe.Pointer(&q[0])), (*byte)(unsafe.Pointer(&x[0])), len(q))
}

// Prefetch asks the CPU to load b into its caches without waiting, so
// several vectors' cache misses overlap (on amd64 with AVX2; a no-op
// elsewhere).
func Prefetch(b []byte) {
	if len(b) > 0 && simd {
		prefetchT0(&b[0], len(b))
	}
}

// minSlot2SIMD is MinSlot2 with the whole blocks of 8 slots in assembly: a
// pass for the two smallest distances, then scans from the top for the
// highest slot holding the smallest and for a slot holding the second.
func minSlot2SIMD(dis []float32, ids []int32) (int, int, bool) {
	n := len(dis)
	ids = ids[:n]
	blocks := n / 8
	inf := float32(math.Inf(1))
	m1, m2, nan := inf, inf, false
	if blocks > 0 {
		m1, m2, nan = min2Valid8(&dis[0], &ids[0], blocks)
	}
	for i := blocks * 8; i < n; i++ {
		if ids[i] == -1 {
			continue
		}
		switch d := dis[i]; {
		case d != d:
			nan = true
		case d <= m1:
			m1, m2 = d, m1
		case d < m2:
			m2 = d
		}
	}
	if nan {
		return -1, -1, false
	}
	best := lastEqualBelow(dis, ids, n, m1)
	if best < 0 {
		return -1, -1, true
	}
	limit := n
	if m2 == m1 { // a tie: the runner-up lies below the highest minimum
		limit = best
	}
	return best, lastEqualBelow(dis, ids, limit, m2), true
}

// lastEqualBelow returns the highest i < limit with ids[i] ≠ −1 and
// dis[i] == m, or −1.
func lastEqualBelow(dis []float32, ids []int32, limit int, m float32) int {
	blocks := limit / 8
	for i := limit - 1; i >= blocks*8; i-- {
		if ids[i] != -1 && dis[i] == m {
			return i
		}
	}
	if blocks > 0 {
		return lastEqual8(&dis[0], &ids[0], blocks, m)
	}
	return -1
}
