//go:build !purego

package quant

import (
	"golang.org/x/sys/cpu"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
)

// On amd64 the 4x kernels are AVX2+FMA assembly (8 bytes widened to 8
// floats per step, four accumulators), the 8x ones the same on 4 bytes of
// nibbles per step, chosen once here by CPU feature; the 32x kernel uses
// AVX-512's VPOPCNTQ or POPCNT, chosen per query (popKernel). Build with
// -tags purego for Go only.
func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		l2U8, dotU8 = l2U8Asm, dotU8Asm
		l2U4, dotU4 = l2U4Asm, dotU4Asm
		dotPlanes = dotPlanesAsm
		decodeU8 = decodeU8Asm
		kernelImpl = "avx2"
	}
}

// popKernel is pop8 and its name: AVX-512 VPOPCNTQ when avx512 and the
// float kernels would use AVX-512 (distance.Fast: the CPU has it, the
// build has no noavx512 tag) and the CPU has VPOPCNTDQ, else POPCNT when
// the CPU has it, else Go. Every one gives the same answers.
func popKernel(avx512 bool) (pop8Func, string) {
	switch {
	case avx512 && distance.Fast(true).Impl == "avx512" && cpu.X86.HasAVX512VPOPCNTDQ:
		return pop8AVX512Asm, "avx512"
	case cpu.X86.HasPOPCNT:
		return pop8POPCNTAsm, "popcnt"
	}
	return pop8Go, "go"
}

//go:noescape
func l2U8AVX2(a, b *float32, c *byte, n int) float32

//go:noescape
func dotU8AVX2(w *float32, c *byte, n int) float32

//go:noescape
func l2U4AVX2(a, b *float32, c *byte, n int) float32

//go:noescape
func dotU4AVX2(w *float32, c *byte, n int) float32

//go:noescape
func dotPlanesAVX2(w *float32, nib *byte, plane *byte, pb int, planes int, n int) float32

//go:noescape
func decodeU8AVX2(dst, vmin, delta *float32, c *byte, n int)

func decodeU8Asm(dst, vmin, delta []float32, c []byte) {
	n := len(dst)
	vmin, delta, c = vmin[:n], delta[:n], c[:n]
	m := n &^ 7
	if m > 0 {
		decodeU8AVX2(&dst[0], &vmin[0], &delta[0], &c[0], m)
	}
	for j := m; j < n; j++ {
		dst[j] = decodeValue(vmin[j], delta[j], c[j])
	}
}

//go:noescape
func pop8POPCNT(planes *uint64, x *byte, words int) uint64

//go:noescape
func pop8AVX512(planes *uint64, x *byte, words int) uint64

func l2U8Asm(a, b []float32, c []byte) float32 {
	n := len(a)
	b = b[:n]
	c = c[:n]
	m := n &^ 7
	var s float32
	if m > 0 {
		s = l2U8AVX2(&a[0], &b[0], &c[0], m)
	}
	for j := m; j < n; j++ {
		t := a[j] - b[j]*float32(c[j])
		s += t * t
	}
	return s
}

func dotU8Asm(w []float32, c []byte) float32 {
	n := len(w)
	c = c[:n]
	m := n &^ 7
	var s float32
	if m > 0 {
		s = dotU8AVX2(&w[0], &c[0], m)
	}
	for j := m; j < n; j++ {
		s += w[j] * float32(c[j])
	}
	return s
}

// l2U4Asm runs the assembly on whole blocks of 8 dimensions (4 bytes)
// and adds the rest in Go.
func l2U4Asm(a, b []float32, c []byte) float32 {
	n := len(a)
	b = b[:n]
	c = c[:(n+1)/2]
	m := n &^ 7
	var s float32
	if m > 0 {
		s = l2U4AVX2(&a[0], &b[0], &c[0], m)
	}
	for j := m; j < n; j++ {
		t := a[j] - b[j]*float32(nibble(c, j))
		s += t * t
	}
	return s
}

func dotU4Asm(w []float32, c []byte) float32 {
	n := len(w)
	c = c[:(n+1)/2]
	m := n &^ 7
	var s float32
	if m > 0 {
		s = dotU4AVX2(&w[0], &c[0], m)
	}
	for j := m; j < n; j++ {
		s += w[j] * float32(nibble(c, j))
	}
	return s
}

// pop8AVX512Asm and pop8POPCNTAsm are the assembly kernels in pop8's
// signature: one indirect call a distance (Query's pop8), then a direct one.
func pop8AVX512Asm(planes []uint64, x []byte) uint64 {
	if n := len(planes) / 8; n > 0 {
		return pop8AVX512(&planes[0], &x[:8*n][0], n)
	}
	return 0
}

func pop8POPCNTAsm(planes []uint64, x []byte) uint64 {
	if n := len(planes) / 8; n > 0 {
		return pop8POPCNT(&planes[0], &x[:8*n][0], n)
	}
	return 0
}

func dotPlanesAsm(w []float32, row []byte, planes, pb int) float32 {
	n := len(w)
	nib := (n + 1) / 2
	row = row[:nib+planes*pb]
	m := n &^ 7
	var s float32
	if m > 0 {
		s = dotPlanesAVX2(&w[0], &row[0], &row[nib], pb, planes, m)
	}
	for j := m; j < n; j++ {
		s += w[j] * float32(planeCode(row, j, nib, planes, pb))
	}
	return s
}
