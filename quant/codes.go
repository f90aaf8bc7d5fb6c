package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/offheap"
	"github.com/faiss-sidecar/faiss-sidecar/internal/par"
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

	// 4x: per-dimension minimum and step (max−min)/255, or 1 for a
	// dimension of integers spanning at most 255; 5x, 6x, 8x: the lower
	// end of the trained range and its step (hi−lo)/(2^bits−1); 32x: the
	// minimum and step of the centroids' 8-bit codes, as 4x's.
	vmin, delta []float32
	// exact (4x): every component of every vector is its code's value,
	// vmin + step·code (decodeValue), so the codes are the vectors themselves
	// and Decode returns them bit for bit: pixels, uint8 embeddings.
	exact bool
	// 32x: origin is the data's mean, which a query is rotated about;
	// cents holds the k centroids the vectors are centred on as 4x codes
	// on vmin and delta (k·d bytes); rot is the rotation.
	origin []float32
	cents  []byte
	k      int
	rot    *rotator
	// 32x, while building: the centroids' search tree (its fine
	// centroids decoded from cents), and each centroid's rotated offset
	// from the origin, R(c − origin).
	tree *cellTree
	rc   []float32
}

// factorBytes is the 32x per-vector header: three float32 factors and
// the centroid's number as a uint16 (see encode32).
const factorBytes = 14

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

// Centroids is how many centroids the 32x codes centre vectors on (0 for
// other levels).
func (c *Codes) Centroids() int { return c.k }

// newCodes allocates the rows of an empty Codes.
func newCodes(n int64, d int, metric faissfmt.Metric, lvl Level) (*Codes, error) {
	if err := checkMetric(metric); err != nil {
		return nil, err
	}
	if !lvl.valid() {
		return nil, fmt.Errorf("unknown compression level %d", uint8(lvl))
	}
	if d < 1 || d > faissfmt.MaxDim {
		return nil, fmt.Errorf("dimension %d out of range [1, %d]", d, faissfmt.MaxDim)
	}
	if n < 0 || n > math.MaxInt32 {
		return nil, fmt.Errorf("%d vectors out of range [0, %d]", n, math.MaxInt32)
	}
	stride := lvl.BytesPerVector(d)
	size := n * int64(stride)
	if size > math.MaxInt {
		return nil, fmt.Errorf("%d vectors × %d bytes do not fit in memory", n, stride)
	}
	c := &Codes{level: lvl, metric: metric, n: n, d: d, stride: stride}
	c.mem = offheap.AllocDense(int(size))
	c.rows = c.mem.B[:size]
	return c, nil
}

func (c *Codes) paramBytes() int {
	switch c.level {
	case Level4x, Level5x, Level6x, Level8x:
		return 8 * c.d
	case Level16x, Level32x:
		return 12*c.d + c.k*c.d + c.rot.signBytes()
	}
	return 0
}

// ---- 4x: 8-bit scalar quantization ----

// train4 sets the per-dimension ranges from the observed minima and
// maxima. A dimension whose sampled values are all integers (integral
// says which) spanning at most 255 gets step 1, so its codes are its
// values less the minimum, without loss; inside uint8's range (int8's)
// the minimum is 0 (−128), so the values the sample missed encode
// without loss too (pixels, uint8 or int8 embeddings).
func (c *Codes) train4(lo, hi []float32, integral []bool) {
	c.vmin = make([]float32, c.d)
	c.delta = make([]float32, c.d)
	for j := range c.d {
		c.vmin[j] = lo[j]
		switch {
		case integral != nil && integral[j] && lo[j] >= 0 && hi[j] <= 255:
			c.vmin[j], c.delta[j] = 0, 1
		case integral != nil && integral[j] && lo[j] >= -128 && hi[j] <= 127:
			c.vmin[j], c.delta[j] = -128, 1
		case hi[j] <= lo[j]:
		case integral != nil && integral[j] && float64(hi[j])-float64(lo[j]) <= 255:
			c.delta[j] = 1
		default:
			c.delta[j] = float32((float64(hi[j]) - float64(lo[j])) / 255)
		}
	}
}

// exact4 reports whether x is what its code dst decodes to, component by
// component (the encoding pass's check for Exact).
func (c *Codes) exact4(dst []byte, x []float32) bool {
	for j, v := range x {
		if decodeValue(c.vmin[j], c.delta[j], dst[j]) != v {
			return false
		}
	}
	return true
}

// Exact reports whether the codes hold the vectors without loss (4x
// codes of data with at most 256 values per dimension on a grid of step
// 1 or (max−min)/255: pixels, uint8 embeddings): Decode then returns each
// vector as stored, and a rerank needs no other copy.
func (c *Codes) Exact() bool { return c.exact }

// Decode writes vector v's values, as its code stands for them, to dst
// (len d); they are the vector's own when Exact.
func (c *Codes) Decode(v int32, dst []float32) {
	if c.level != Level4x {
		panic("quant: Decode serves 4x codes")
	}
	decodeU8(dst[:c.d], c.vmin, c.delta, c.row(v))
}

// encode4 writes x's code: round((x−min)/step) clamped to [0, 255], so a
// value outside the trained range (unseen by the sample) clamps.
func (c *Codes) encode4(dst []byte, x []float32) {
	dst = dst[:len(x)]
	vmin, delta := c.vmin[:len(x)], c.delta[:len(x)]
	for j, v := range x {
		dst[j] = uint8(quantize(v, vmin[j], delta[j], 255))
	}
}

// ---- 8x: 4-bit scalar quantization on trained ranges ----

// clipFractions are the candidate ends of a dimension's 8x range: the
// sample's quantiles at these fractions from either end (0: the extreme).
// An outlier that stretches min/max widens all 16 steps of its dimension;
// the range of least error gives up the outliers (they clamp) and recalls
// better on clustered data (docs/quantization.md, the 8x table).
var clipFractions = []float64{0, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.16, 0.2}

// train8 sets each dimension's range from rows sample vectors (row-major)
// to the pair of quantiles (clipFractions) whose uniform quantization to
// the level's 2^bits values (16 at 8x) has the least squared error over
// the sample; values outside the range clamp to its ends. 5x and 6x train
// the same way.
func (c *Codes) train8(sample []float32, rows, workers int) {
	d := c.d
	levels := 1 << c.level.sqBits()
	c.vmin = make([]float32, d)
	c.delta = make([]float32, d)
	if rows == 0 {
		return
	}
	par.For(d, workers, func(j int) {
		col := make([]float32, rows)
		for i := range col {
			col[i] = sample[i*d+j]
		}
		lo, hi := clipRange(col, levels)
		c.vmin[j] = lo
		if hi > lo {
			c.delta[j] = float32((float64(hi) - float64(lo)) / float64(levels-1))
		}
	})
}

// clipRange sorts s and returns the [lo, hi] among its quantiles at
// clipFractions that minimizes the squared error of uniform quantization
// to levels values. Each candidate costs O(levels·log len(s)): the values
// a level takes are a run of the sorted sample, whose error follows from
// prefix sums of the (centred) values and their squares.
func clipRange(s []float32, levels int) (lo, hi float32) {
	slices.Sort(s)
	m := len(s)
	var mean float64
	for _, v := range s {
		mean += float64(v)
	}
	mean /= float64(m)
	p1 := make([]float64, m+1) // Σ (v−mean) over s[:i]
	p2 := make([]float64, m+1) // Σ (v−mean)²
	for i, v := range s {
		t := float64(v) - mean
		p1[i+1], p2[i+1] = p1[i]+t, p2[i]+t*t
	}
	// err is the squared error of the run s[a:b] reconstructed as r.
	err := func(a, b int, r float64) float64 {
		r -= mean
		return (p2[b] - p2[a]) - 2*r*(p1[b]-p1[a]) + r*r*float64(b-a)
	}
	quantile := func(f float64) int { return int(f * float64(m-1)) }
	best := math.Inf(1)
	lo, hi = s[0], s[m-1]
	for _, fl := range clipFractions {
		for _, fh := range clipFractions {
			a, b := s[quantile(fl)], s[m-1-quantile(fh)]
			if b <= a {
				continue
			}
			step := (float64(b) - float64(a)) / float64(levels-1)
			var e float64
			prev := 0
			for k := range levels {
				end := m
				if k < levels-1 { // values below the midpoint to the next level
					t := float32(float64(a) + (float64(k)+0.5)*step)
					end = prev + sort.Search(m-prev, func(i int) bool { return s[prev+i] >= t })
				}
				e += err(prev, end, float64(a)+float64(k)*step)
				prev = end
			}
			if e < best {
				best, lo, hi = e, a, b
			}
		}
	}
	return lo, hi
}

// encode8 writes x's code: dimension j's round((x−lo)/step), clamped to
// [0, 15], in the low nibble of byte j/2 for even j, the high for odd.
func (c *Codes) encode8(dst []byte, x []float32) {
	dst = dst[:(len(x)+1)/2]
	clear(dst)
	vmin, delta := c.vmin[:len(x)], c.delta[:len(x)]
	for j, v := range x {
		dst[j>>1] |= uint8(quantize(v, vmin[j], delta[j], 15)) << (4 * (j & 1))
	}
}

// quantize is round((v−lo)/step) clamped to [0, top]; 0 when step is 0 (a
// dimension with one value).
func quantize(v, lo, step, top float32) uint32 {
	if step == 0 {
		return 0
	}
	t := (v-lo)/step + 0.5
	switch {
	case t <= 0:
		return 0
	case t >= top:
		return uint32(top)
	}
	return uint32(t)
}

// encodePlanes writes x's 5x or 6x code: code_j = round((x_j−lo)/step),
// clamped to [0, 2^bits−1]; its high 4 bits as encode8's nibbles, bit p
// of its low bits as bit j&7 of byte j>>3 of plane p, then ‖x̂‖² (x̂_j =
// lo + step·code_j) as a float32, the term an L2 estimate adds.
func (c *Codes) encodePlanes(dst []byte, x []float32) {
	d := len(x)
	p := c.level.planes()
	nib, pb := (d+1)/2, planeBytes(d)
	dst = dst[:nib+p*pb+4]
	clear(dst)
	top := float32(int(1)<<c.level.sqBits() - 1)
	vmin, delta := c.vmin[:d], c.delta[:d]
	var norm float64
	for j, v := range x {
		q := quantize(v, vmin[j], delta[j], top)
		dst[j>>1] |= uint8(q>>p) << (4 * (j & 1))
		for b := range p {
			dst[nib+b*pb+j>>3] |= uint8(q>>b&1) << (j & 7)
		}
		r := float64(vmin[j]) + float64(delta[j])*float64(q)
		norm += r * r
	}
	putF32(dst[nib+p*pb:], float32(norm))
}

// ---- 32x: sign bits of the rotated residual (RaBitQ family) ----

// A vector o is centred on its centroid c (the nearest the tree finds):
// with the residual y = R(o−c) (R orthogonal, r = ‖y‖), it is coded as the
// signs b of y and three factors, so that for a query with rotated
// residual q' = R(q−c) and G' = Σᵢ (2bᵢ−1)·q'ᵢ:
//
//	‖o−q‖² ≈ r² + ‖q−c‖² − B·G',  B = 2r²/Σᵢ|yᵢ|
//
// (the estimator ⟨x̄,q'⟩/⟨x̄,u⟩ of ⟨u,q'⟩ with x̄ = (2b−1)/√d, u = y/r,
// unbiased over the random rotation). For inner product
// ⟨o,q⟩ = ⟨c,q⟩ + ⟨o−c,c⟩ + ⟨o−c,q−c⟩ ≈ ⟨c,q⟩ + ⟨o−c,c⟩ + B/2·G'.
// A query is rotated once, about the origin m: G' = G − K with
// G = Σᵢ (2bᵢ−1)·R(q−m)ᵢ and K = Σᵢ (2bᵢ−1)·R(c−m)ᵢ, a constant of the
// vector folded into its first factor: A = r² + B·K for L2,
// ⟨o−c,c⟩ − B·K/2 for inner product. So per vector the query needs G
// (a popcount kernel, see Query) and its centroid's term ‖q−c‖² or ⟨c,q⟩
// (one distance per centroid a query meets). C = 2·popcount(b) − d lets
// the query side be quantized with an offset. Row: A, B, C as float32,
// the centroid's number as a uint16, then the bits in little-endian
// 64-bit words.
func (c *Codes) encode32(dst []byte, x, y []float32) {
	d := c.d
	id, oc := c.residual(x, y)
	y = y[:d]
	rc := c.rc[id*d : (id+1)*d]
	var r2, l1, k float64
	pc := 0
	bits := dst[factorBytes:]
	clear(bits)
	for j, v := range y {
		r2 += float64(v) * float64(v)
		l1 += math.Abs(float64(v))
		if v > 0 {
			bits[j>>3] |= 1 << (j & 7)
			pc++
			k += float64(rc[j])
		} else {
			k -= float64(rc[j])
		}
	}
	c.putFactors(dst, id, r2, l1, k, oc, 1, float64(2*pc-d))
}

// residual sets y = R(x − c) for x's centroid c (the tree's nearest) and
// returns c's number and ⟨x − c, c⟩ (inner product's exact term).
func (c *Codes) residual(x, y []float32) (id int, oc float64) {
	d := c.d
	id = c.tree.nearest(x)
	cent := c.tree.fine[id*d : (id+1)*d]
	y = y[:d]
	for j := range y {
		y[j] = x[j] - cent[j]
		oc += float64(y[j]) * float64(cent[j])
	}
	c.rot.apply(y)
	return id, oc
}

// putFactors writes a 16x or 32x row's header for a residual of squared
// norm r2 coded as x̄ (xy = ⟨x̄, y⟩, k = ⟨x̄, R(c − m)⟩): with
// s = 2·r2/xy (0 unless xy > 0), A = r2 + s·k (inner product: oc − s·k/2),
// B = s·step, C = cc, and the centroid's number id.
func (c *Codes) putFactors(dst []byte, id int, r2, xy, k, oc, step, cc float64) {
	var s float64
	if xy > 0 {
		s = 2 * r2 / xy
	}
	a := r2 + s*k
	if c.metric == faissfmt.MetricInnerProduct {
		a = oc - s*k/2
	}
	putF32(dst[0:], float32(a))
	putF32(dst[4:], float32(s*step))
	putF32(dst[8:], float32(cc))
	binary.LittleEndian.PutUint16(dst[12:], uint16(id))
}

// ---- 16x: two bits a dimension of the rotated residual ----

// deltaSteps is how many grid steps encode16 tries: σ·(0.55 + 0.1·s) for
// s < deltaSteps, σ = ‖y‖/√d. After a random rotation the coordinates are
// near Gaussian, whose best uniform 4-level step is about σ, so a few
// steps around it do as well as a wide search for a fraction of the build
// time.
const deltaSteps = 12

// encode16 is encode32 with four levels a dimension: the rotated residual
// y is coded as cᵢ ∈ {0, 1, 2, 3} standing for x̄ᵢ = (cᵢ − 3/2)·Δ, the
// grid step Δ chosen among deltaSteps candidates near the coordinates'
// spread to maximize the cosine of
// x̄ and y (a smaller step clamps the largest |yᵢ|, a larger one wastes
// levels). The estimator is 32x's with x̄ for the signs: ⟨y, q'⟩ ≈
// ⟨x̄, q'⟩·r²/⟨x̄, y⟩ (RaBitQ extended to more bits), so with s = 2r²/⟨x̄, y⟩
// and G = Σᵢ (cᵢ − 3/2)·R(q − m)ᵢ the row's factors are A = r² + s·K
// (K = ⟨x̄, R(c − m)⟩; inner product ⟨o−c, c⟩ − s·K/2), B = s·Δ and
// C = Σᵢ cᵢ, and the estimate is A + t_c − B·G as at 32x. Row: A, B, C,
// the centroid's number, then the plane of the cᵢ's low bits and the
// plane of their high bits, d bits each in 64-bit words.
func (c *Codes) encode16(dst []byte, x, y []float32) {
	d := c.d
	id, oc := c.residual(x, y)
	y = y[:d]
	var r2 float64
	for _, v := range y {
		r2 += float64(v) * float64(v)
	}
	sigma := math.Sqrt(r2 / float64(d))
	delta, best := 1.0, -1.0
	for s := range deltaSteps {
		if sigma == 0 {
			break
		}
		step := sigma * (0.55 + 0.1*float64(s))
		if cos := cosine2(y, float32(1/step)); cos > best {
			best, delta = cos, step
		}
	}
	rc := c.rc[id*d : (id+1)*d]
	wb := 8 * words(d)
	lowBits, highBits := dst[factorBytes:factorBytes+wb], dst[factorBytes+wb:factorBytes+2*wb]
	clear(lowBits)
	clear(highBits)
	var xy, k, sum float64
	inv := float32(1 / delta)
	for j, v := range y {
		code := code2(v, inv)
		xv := float64(code-1.5) * delta
		xy += xv * float64(v)
		k += xv * float64(rc[j])
		sum += float64(code)
		lowBits[j>>3] |= uint8(int(code)&1) << (j & 7)
		highBits[j>>3] |= uint8(int(code)>>1) << (j & 7)
	}
	c.putFactors(dst, id, r2, xy, k, oc, delta, sum)
}

// code2 is v's 2-bit code on the grid of step 1/inv centred on 0:
// ⌊v·inv + 2⌋ clamped to [0, 3] (a negative t clamps to 0, so truncation
// serves for the floor).
func code2(v, inv float32) float32 {
	t := v*inv + 2
	if t < 1 {
		return 0
	}
	return float32(min(int(t), 3))
}

// cosine2 is, up to the factor 1/‖y‖ common to every step, the cosine of
// y and its code2 codes on the grid of step 1/inv (centred: cᵢ − 3/2); the
// step cancels. In float32: encode16 tries deltaSteps steps a vector.
func cosine2(y []float32, inv float32) float64 {
	var dot, nn float32
	for _, v := range y {
		x := code2(v, inv) - 1.5
		dot += x * v
		nn += x * x
	}
	return float64(dot) / math.Sqrt(float64(nn))
}

// train32 sets the origin (the mean of the sample, from its sums), the
// rotation, and the centroids trained on the m sample rows, coded to 8
// bits a dimension on their own [min, max] (vectors are then centred on
// the decoded centroids, so the codes lose nothing to it, and a centroid
// takes d bytes); it keeps the tree and the rotated centroid offsets for
// encode32 (dropBuild frees them). l2 is the build's fast kernel.
func (c *Codes) train32(sample []float32, sum []float64, m int, seed uint64, workers int, l2 l2Func) {
	d := c.d
	c.origin = make([]float32, d)
	for j := range c.origin {
		if m > 0 {
			c.origin[j] = float32(sum[j] / float64(m))
		}
	}
	c.rot = newRotator(d, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x632be59bd9b4e019))
	k := centroidCount(c.level, c.n, d, m)
	c.tree = trainCells(l2, sample, m, d, k, workers, rng)
	fine := c.tree.fine
	c.k = len(fine) / d // 1 ≤ c.k ≤ k: trainCells never exceeds k (TestCellTreeDuplicates)
	lo, hi := make([]float32, d), make([]float32, d)
	copy(lo, fine[:d])
	copy(hi, fine[:d])
	for i := range c.k {
		for j, v := range fine[i*d : (i+1)*d] {
			lo[j], hi[j] = min(lo[j], v), max(hi[j], v)
		}
	}
	c.train4(lo, hi, nil)
	c.cents = make([]byte, c.k*d)
	c.rc = make([]float32, c.k*d)
	for i := range c.k {
		code := c.cents[i*d : (i+1)*d]
		x := fine[i*d : (i+1)*d]
		c.encode4(code, x)
		decodeU8(x, c.vmin, c.delta, code)
		r := c.rc[i*d : (i+1)*d]
		for j := range r {
			r[j] = x[j] - c.origin[j]
		}
		c.rot.apply(r)
	}
}

// dropBuild frees what only encoding needs.
func (c *Codes) dropBuild() { c.tree, c.rc = nil, nil }
