//go:build !purego

package distance

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// On amd64 with AVX2 and FMA the fast kernels are the avo-generated
// assembly in kernels_amd64.s (regenerate with internal/distance/asm);
// chosen once at start-up. Build with -tags purego for the Go kernels.
func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		L2Fast, IPFast, L2FastF, IPFastF = l2Bytes, ipBytes, l2Floats, ipFloats
		MinSlot = minSlotAVX2
		FastImpl = "avx2"
	}
}

func l2Bytes(q []float32, x []byte) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:4*len(q)]
	return l2AVX2((*byte)(unsafe.Pointer(&q[0])), &x[0], len(q))
}

func ipBytes(q []float32, x []byte) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:4*len(q)]
	return ipAVX2((*byte)(unsafe.Pointer(&q[0])), &x[0], len(q))
}

func l2Floats(q, x []float32) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:len(q)]
	return l2AVX2((*byte)(unsafe.Pointer(&q[0])), (*byte)(unsafe.Pointer(&x[0])), len(q))
}

func ipFloats(q, x []float32) float32 {
	if len(q) == 0 {
		return 0
	}
	x = x[:len(q)]
	return ipAVX2((*byte)(unsafe.Pointer(&q[0])), (*byte)(unsafe.Pointer(&x[0])), len(q))
}

// Prefetch asks the CPU to load b into its caches without waiting, so
// several vectors' cache misses overlap (on amd64 with AVX2; a no-op
// elsewhere).
func Prefetch(b []byte) {
	if len(b) > 0 && FastImpl == "avx2" {
		prefetchT0(&b[0], len(b))
	}
}

// minSlotAVX2 is MinSlot with the whole blocks of 8 slots in assembly: a
// pass for the minimum, then one from the top for its highest slot.
func minSlotAVX2(dis []float32, ids []int32) (int, bool) {
	n := len(dis)
	ids = ids[:n]
	blocks := n / 8
	m, nan := float32(math.Inf(1)), false
	if blocks > 0 {
		m, nan = minValid8(&dis[0], &ids[0], blocks)
	}
	for i := blocks * 8; i < n; i++ {
		if ids[i] != -1 {
			d := dis[i]
			nan = nan || d != d
			m = min(m, d)
		}
	}
	if nan {
		return -1, false
	}
	for i := n - 1; i >= blocks*8; i-- {
		if ids[i] != -1 && dis[i] == m {
			return i, true
		}
	}
	if blocks > 0 {
		return lastEqual8(&dis[0], &ids[0], blocks, m), true
	}
	return -1, true
}
