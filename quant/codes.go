package quant

import (
	"fmt"
	"math"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/offheap"
)

// Codes is the compressed copy of n vectors of dimension d: one row of
// Level.BytesPerVector(d) bytes per vector, contiguous and row-major so a
// vector's code is one or a few cache lines, held off the Go heap, plus
// the small trained parameters. Immutable once built or loaded; safe for
// concurrent readers, each with its own Query. Close releases the rows.
type Codes struct {
	level  Level
	metric faissfmt.Metric
	n      int64
	d      int
	stride int

	mem  offheap.Buf
	rows []byte // mem.B[:n*stride]

	// 4x: per-dimension minimum and step (max−min)/255.
	vmin, delta []float32
	// 32x: the centroid the vectors are centred on and the rotation.
	centroid []float32
	rot      *rotator
}

// factorBytes is the 32x per-vector header: three float32 factors
// (see encode32).
const factorBytes = 12

// Shape is the number of vectors and their dimension.
func (c *Codes) Shape() (n int64, d int) { return c.n, c.d }

// Level is the compression level.
func (c *Codes) Level() Level { return c.level }

// Metric is the metric the estimates follow.
func (c *Codes) Metric() faissfmt.Metric { return c.metric }

// Bytes is the memory the codes hold: the rows (off the Go heap) plus the
// trained parameters. It is what a memory budget is charged.
func (c *Codes) Bytes() int64 {
	return int64(len(c.mem.B)) + int64(c.paramBytes()) + 256
}

// Close releases the rows; the Codes and its queries must not be used
// after. Safe to call twice.
func (c *Codes) Close() error {
	c.rows = nil
	return c.mem.Free()
}

func (c *Codes) row(v int32) []byte {
	o := int64(v) * int64(c.stride)
	return c.rows[o : o+int64(c.stride)]
}

// newCodes allocates the rows of an empty Codes.
func newCodes(n int64, d int, metric faissfmt.Metric, lvl Level) (*Codes, error) {
	if err := checkMetric(metric); err != nil {
		return nil, err
	}
	if !lvl.valid() {
		return nil, fmt.Errorf("quant: unknown compression level %d", uint8(lvl))
	}
	if d < 1 || d > faissfmt.MaxDim {
		return nil, fmt.Errorf("quant: dimension %d out of range [1, %d]", d, faissfmt.MaxDim)
	}
	if n < 0 || n > math.MaxInt32 {
		return nil, fmt.Errorf("quant: %d vectors out of range [0, %d]", n, math.MaxInt32)
	}
	stride := lvl.BytesPerVector(d)
	size := n * int64(stride)
	if size > math.MaxInt {
		return nil, fmt.Errorf("quant: %d vectors × %d bytes do not fit in memory", n, stride)
	}
	c := &Codes{level: lvl, metric: metric, n: n, d: d, stride: stride}
	c.mem = offheap.AllocDense(int(size))
	c.rows = c.mem.B[:size]
	return c, nil
}

func (c *Codes) paramBytes() int {
	switch c.level {
	case Level4x:
		return 8 * c.d
	case Level32x:
		return 4*c.d + c.rot.signBytes()
	}
	return 0
}

// ---- 4x: 8-bit scalar quantization ----

// train4 sets the per-dimension ranges from the observed minima and maxima.
func (c *Codes) train4(lo, hi []float32) {
	c.vmin = make([]float32, c.d)
	c.delta = make([]float32, c.d)
	for j := range c.d {
		c.vmin[j] = lo[j]
		if hi[j] > lo[j] {
			c.delta[j] = float32((float64(hi[j]) - float64(lo[j])) / 255)
		}
	}
}

// encode4 writes x's code: round((x−min)/step) clamped to [0, 255], so a
// value outside the trained range (unseen by the sample) clamps.
func (c *Codes) encode4(dst []byte, x []float32) {
	dst = dst[:len(x)]
	vmin, delta := c.vmin[:len(x)], c.delta[:len(x)]
	for j, v := range x {
		if delta[j] == 0 {
			dst[j] = 0
			continue
		}
		t := (v-vmin[j])/delta[j] + 0.5
		switch {
		case t <= 0:
			dst[j] = 0
		case t >= 255:
			dst[j] = 255
		default:
			dst[j] = uint8(t)
		}
	}
}

// ---- 32x: sign bits of the rotated residual (RaBitQ family) ----

// A vector o with residual y = R(o−c) (R orthogonal, r = ‖y‖) is coded as
// the signs b of y and three factors, so that for a query with rotated
// residual q' = R(q−c) and G = Σᵢ (2bᵢ−1)·q'ᵢ:
//
//	‖o−q‖² ≈ A + ‖q'‖² − B·G,  A = r², B = 2r²/Σᵢ|yᵢ|
//
// (the estimator ⟨x̄,q'⟩/⟨x̄,u⟩ of ⟨u,q'⟩ with x̄ = (2b−1)/√d, u = y/r,
// unbiased over the random rotation). For inner product
// ⟨o,q⟩ = ⟨c,q⟩ + ⟨o−c,c⟩ + ⟨o−c,q−c⟩ ≈ ⟨c,q⟩ + A + B/2·G with A = ⟨o−c,c⟩:
// estimating on the centred query keeps the error small when the data sit
// far from the origin. C = 2·popcount(b) − d lets the query side be
// quantized to 4 bits with an offset (see Query). Row: A, B, C as
// float32, then the bits in little-endian 64-bit words.
func (c *Codes) encode32(dst []byte, x, y []float32) {
	y = y[:c.d]
	for j := range y {
		y[j] = x[j] - c.centroid[j]
	}
	var r2, l1, oc float64
	if c.metric == faissfmt.MetricInnerProduct {
		for j, v := range y {
			oc += float64(v) * float64(c.centroid[j])
		}
	}
	c.rot.apply(y)
	pc := 0
	bits := dst[factorBytes:]
	clear(bits)
	for j, v := range y {
		r2 += float64(v) * float64(v)
		l1 += math.Abs(float64(v))
		if v > 0 {
			bits[j>>3] |= 1 << (j & 7)
			pc++
		}
	}
	var b float64
	if l1 > 0 {
		b = 2 * r2 / l1
	}
	a := r2
	if c.metric == faissfmt.MetricInnerProduct {
		a = oc
	}
	putF32(dst[0:], float32(a))
	putF32(dst[4:], float32(b))
	putF32(dst[8:], float32(2*pc-c.d))
}
