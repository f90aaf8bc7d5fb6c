package distance

import (
	"encoding/binary"
	"math"
)

// f32 reads the little-endian float32 at b[4j:].
func f32(b []byte, j int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
}

// L2Exact is Σ (q[j] − x[j])², j in order, each product rounded to float32.
// x holds len(q) little-endian float32 values.
func L2Exact(q []float32, x []byte) float32 {
	x = x[:4*len(q)]
	var acc float32
	for j, qv := range q {
		t := qv - f32(x, j)
		acc += float32(t * t)
	}
	return acc
}

// IPExact is Σ q[j]·x[j], j in order, each product rounded to float32.
func IPExact(q []float32, x []byte) float32 {
	x = x[:4*len(q)]
	var acc float32
	for j, qv := range q {
		acc += float32(qv * f32(x, j))
	}
	return acc
}

// L2ExactF and IPExactF are the exact kernels over decoded float32 vectors.
func L2ExactF(q, x []float32) float32 {
	x = x[:len(q)]
	var acc float32
	for j, qv := range q {
		t := qv - x[j]
		acc += float32(t * t)
	}
	return acc
}

func IPExactF(q, x []float32) float32 {
	x = x[:len(q)]
	var acc float32
	for j, qv := range q {
		acc += float32(qv * x[j])
	}
	return acc
}

// Hamming is the number of differing bits of a and b (equal lengths).
func Hamming(a, b []byte) int {
	b = b[:len(a)]
	n := 0
	j := 0
	for ; j+8 <= len(a); j += 8 {
		n += popcount64(binary.LittleEndian.Uint64(a[j:]) ^ binary.LittleEndian.Uint64(b[j:]))
	}
	for ; j < len(a); j++ {
		n += popcount64(uint64(a[j] ^ b[j]))
	}
	return n
}

// DecodeFloats copies len(dst) little-endian float32 values from b.
func DecodeFloats(dst []float32, b []byte) {
	b = b[:4*len(dst)]
	for j := range dst {
		dst[j] = f32(b, j)
	}
}
