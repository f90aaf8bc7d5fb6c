package quant

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The hot loops, chosen once at init by CPU feature (amd64 assembly where
// the CPU has it, see kernels_amd64.go) and never changed; the Go versions
// are the reference the assembly is tested against. 32x's and 16x's
// popcount, which may use AVX-512, is chosen per query instead
// (popKernel): that choice is the caller's.
var (
	// l2U8 is Σⱼ (a[j] − b[j]·c[j])² over len(a) dimensions.
	l2U8 = l2U8Go
	// dotU8 is Σⱼ w[j]·c[j] over len(w) dimensions.
	dotU8 = dotU8Go
	// l2U4 is l2U8 on 4-bit codes: c[j] is the nibble j&1 (low first) of
	// byte j/2, so c holds (len(a)+1)/2 bytes.
	l2U4 = l2U4Go
	// dotU4 is dotU8 on 4-bit codes, as l2U4 reads them.
	dotU4 = dotU4Go
	// dotPlanes is Σⱼ w[j]·code_j over len(w) dimensions of a 5x or 6x
	// row: code_j = nibble j of row (as dotU4 reads it) << planes, plus
	// bit j of each plane p << p, plane p being the pb bytes at
	// row[nib+p·pb:] (nib = (len(w)+1)/2).
	dotPlanes = dotPlanesGo
	// decodeU8 sets dst[j] = vmin[j] + (delta[j]·c[j] rounded to
	// float32) over len(dst) dimensions: 4x codes back to values.
	decodeU8 = decodeU8Go
	// kernelImpl names the kernels above ("avx2" or "go").
	kernelImpl = "go"
)

// pop8Func is the signature of pop8: Σₖ 2ᵏ·Σ_w popcount(x_w & planes[8w+k]),
// k = 0…7, over the len(planes)/8 little-endian words of x: Σᵢ bᵢ·qqᵢ for
// the bits b of x and the 8-bit values qq whose bit planes planes holds.
type pop8Func = func(planes []uint64, x []byte) uint64

func decodeU8Go(dst, vmin, delta []float32, c []byte) {
	vmin, delta, c = vmin[:len(dst)], delta[:len(dst)], c[:len(dst)]
	for j := range dst {
		dst[j] = decodeValue(vmin[j], delta[j], c[j])
	}
}

// decodeValue is the value a 4x code stands for in a dimension of minimum
// lo and step: the product rounded to float32, then the sum (never fused,
// so the build's check for Codes.Exact and every decoder, the assembly's
// VMULPS then VADDPS too, agree bit for bit).
func decodeValue(lo, step float32, code byte) float32 { return lo + float32(step*float32(code)) }

func l2U8Go(a, b []float32, c []byte) float32 {
	b = b[:len(a)]
	c = c[:len(a)]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(a); j += 4 {
		t0 := a[j] - b[j]*float32(c[j])
		t1 := a[j+1] - b[j+1]*float32(c[j+1])
		t2 := a[j+2] - b[j+2]*float32(c[j+2])
		t3 := a[j+3] - b[j+3]*float32(c[j+3])
		s0 += t0 * t0
		s1 += t1 * t1
		s2 += t2 * t2
		s3 += t3 * t3
	}
	for ; j < len(a); j++ {
		t := a[j] - b[j]*float32(c[j])
		s0 += t * t
	}
	return (s0 + s1) + (s2 + s3)
}

func dotU8Go(w []float32, c []byte) float32 {
	c = c[:len(w)]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(w); j += 4 {
		s0 += w[j] * float32(c[j])
		s1 += w[j+1] * float32(c[j+1])
		s2 += w[j+2] * float32(c[j+2])
		s3 += w[j+3] * float32(c[j+3])
	}
	for ; j < len(w); j++ {
		s0 += w[j] * float32(c[j])
	}
	return (s0 + s1) + (s2 + s3)
}

func l2U4Go(a, b []float32, c []byte) float32 {
	n := len(a)
	b = b[:n]
	c = c[:(n+1)/2]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= n; j += 4 {
		c0, c1 := c[j>>1], c[j>>1+1]
		t0 := a[j] - b[j]*float32(c0&15)
		t1 := a[j+1] - b[j+1]*float32(c0>>4)
		t2 := a[j+2] - b[j+2]*float32(c1&15)
		t3 := a[j+3] - b[j+3]*float32(c1>>4)
		s0 += t0 * t0
		s1 += t1 * t1
		s2 += t2 * t2
		s3 += t3 * t3
	}
	for ; j < n; j++ {
		t := a[j] - b[j]*float32(nibble(c, j))
		s0 += t * t
	}
	return (s0 + s1) + (s2 + s3)
}

func dotU4Go(w []float32, c []byte) float32 {
	n := len(w)
	c = c[:(n+1)/2]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= n; j += 4 {
		c0, c1 := c[j>>1], c[j>>1+1]
		s0 += w[j] * float32(c0&15)
		s1 += w[j+1] * float32(c0>>4)
		s2 += w[j+2] * float32(c1&15)
		s3 += w[j+3] * float32(c1>>4)
	}
	for ; j < n; j++ {
		s0 += w[j] * float32(nibble(c, j))
	}
	return (s0 + s1) + (s2 + s3)
}

// nibble is dimension j's 4-bit code in c.
func nibble(c []byte, j int) byte { return c[j>>1] >> (4 * (j & 1)) & 15 }

func pop8Go(planes []uint64, x []byte) uint64 {
	n := len(planes) / 8
	x = x[:8*n]
	var t uint64
	for w := range n {
		v := binary.LittleEndian.Uint64(x[8*w:])
		for k, p := range planes[8*w : 8*w+8] {
			t += uint64(bits.OnesCount64(v&p)) << k
		}
	}
	return t
}

func f32(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

func putF32(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }

// planeCode is dimension j's code in a 5x or 6x row of nib nibble bytes
// and planes planes of pb bytes.
func planeCode(row []byte, j, nib, planes, pb int) int {
	code := int(nibble(row, j)) << planes
	for p := range planes {
		code |= int(row[nib+p*pb+j>>3]>>(j&7)&1) << p
	}
	return code
}

func dotPlanesGo(w []float32, row []byte, planes, pb int) float32 {
	n := len(w)
	nib := (n + 1) / 2
	var s0, s1 float32
	for j := 0; j < n; j++ {
		code := planeCode(row, j, nib, planes, pb)
		if j&1 == 0 {
			s0 += w[j] * float32(code)
		} else {
			s1 += w[j] * float32(code)
		}
	}
	return s0 + s1
}
