package quant

import (
	"fmt"
	"slices"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
)

// Level is a compression level: how many times smaller than float32 the
// codes are (nominally; the 32x codes carry a few bytes of per-vector
// factors, so they are somewhat less than 32× smaller at small d).
type Level uint8

// The levels quant builds.
const (
	// Level4x is 8-bit scalar quantization: one byte per dimension, on
	// each dimension's [min, max].
	Level4x Level = 4
	// Level5x is 6-bit scalar quantization on trained ranges, as 8x: the
	// code's high 4 bits as 8x's nibbles, its low 2 bits as two bit
	// planes, and ‖x̂‖² (32/6 ≈ 5.3 times smaller than float32).
	Level5x Level = 5
	// Level6x is 5-bit scalar quantization on trained ranges, as 5x with
	// one bit plane (32/5 = 6.4 times smaller).
	Level6x Level = 6
	// Level8x is 4-bit scalar quantization: two dimensions a byte, on a
	// per-dimension range chosen to minimize the quantization error of a
	// sample (an outlier does not widen every step of its dimension).
	Level8x Level = 8
	// Level16x is two bits per dimension of the rotated offset from the
	// vector's centroid, plus 32x's factors (RaBitQ family, extended to
	// four levels a dimension).
	Level16x Level = 16
	// Level32x is one bit per dimension after a random rotation, plus
	// three float32 correction factors per vector (RaBitQ family).
	Level32x Level = 32
)

// Levels lists the levels from finest to coarsest (the order a caller
// resolving "auto" tries them in). It is the one list of levels: parsing,
// names and validity follow it.
var Levels = []Level{Level4x, Level5x, Level6x, Level8x, Level16x, Level32x}

// ParseLevel reads a level's name ("4x", "5x", "6x", "8x", "16x", "32x": Level.String, exactly).
// "auto" is the caller's to resolve, with BytesPerVector and its budget.
func ParseLevel(s string) (Level, error) {
	for _, l := range Levels {
		if s == l.String() {
			return l, nil
		}
	}
	names := make([]string, len(Levels))
	for i, l := range Levels {
		names[i] = l.String()
	}
	return 0, fmt.Errorf("unknown compression level %q (want %s)", s, strings.Join(names, ", "))
}

func (l Level) String() string {
	if l.valid() {
		return fmt.Sprintf("%dx", uint8(l))
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

func (l Level) valid() bool { return slices.Contains(Levels, l) }

// sqBits is the bits per dimension of a scalar-quantization level (4x,
// 5x, 6x, 8x), 0 for others.
func (l Level) sqBits() int {
	switch l {
	case Level4x:
		return 8
	case Level5x:
		return 6
	case Level6x:
		return 5
	case Level8x:
		return 4
	}
	return 0
}

// planes is the number of low-bit planes of a level coded as nibbles plus
// bit planes (5x: 2, 6x: 1), 0 for others.
func (l Level) planes() int {
	if l == Level5x || l == Level6x {
		return l.sqBits() - 4
	}
	return 0
}

// codeBits is the bits per dimension of a RaBitQ-family level (16x: 2,
// 32x: 1), 0 for others: its rows hold that many planes of d sign or
// level bits after the factors and the centroid's number.
func (l Level) codeBits() int {
	switch l {
	case Level16x:
		return 2
	case Level32x:
		return 1
	}
	return 0
}

// planeBytes is the size of one bit plane of d dimensions.
func planeBytes(d int) int { return (d + 7) / 8 }

// BytesPerVector is the size of one vector's code of dimension d, the
// row stride of Codes (0 for an unknown level or d < 1).
func (l Level) BytesPerVector(d int) int {
	if d < 1 {
		return 0
	}
	switch l {
	case Level4x:
		return d
	case Level8x:
		return (d + 1) / 2
	case Level5x, Level6x: // nibbles, bit planes, ‖x̂‖²
		return (d+1)/2 + l.planes()*planeBytes(d) + 4
	case Level16x, Level32x:
		return factorBytes + l.codeBits()*8*words(d)
	}
	return 0
}

// words is the number of 64-bit words holding d sign bits.
func words(d int) int { return (d + 63) / 64 }

// DefaultOversample is the default rerank oversampling of OpenSearch's
// on_disk mode (k-NN plugin, CompressionLevel's default rescore context):
// 5 for dimensions up to 1000 at every level; above that 2 for 4x and 8x,
// 3 for 16x and 32x. The caller reranks ⌈k·oversample⌉ candidates.
func DefaultOversample(l Level, d int) float64 {
	if d <= 1000 {
		return 5
	}
	if l.codeBits() > 0 {
		return 3
	}
	return 2
}

// checkMetric accepts the metrics the estimators serve.
func checkMetric(m faissfmt.Metric) error {
	if m != faissfmt.MetricL2 && m != faissfmt.MetricInnerProduct {
		return fmt.Errorf("metric %s is not supported (L2 and inner product are)", m)
	}
	return nil
}
