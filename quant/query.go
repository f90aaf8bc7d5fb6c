package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
)

// Query estimates distances from one query vector to the codes, in the
// HNSW search's convention: smaller is nearer, squared L2 for L2 and
// −inner product for inner product. Its buffers are allocated once by
// NewQuery; Reset, Dist and DistBatch allocate nothing. One goroutine at a
// time.
type Query struct {
	c *Codes

	// 4x and 8x, L2: a = q − min (the kernel sums (a − step·code)²).
	// 4x and 8x IP, 5x and 6x: a = q·step and base = Σ q·min (⟨q, x̂⟩ =
	// base + Σ a·code); 5x and 6x L2 also qn = ‖q‖² (‖q‖² − 2⟨q, x̂⟩ + ‖x̂‖²).
	// 16x, 32x: as 4x, for the centroids' 8-bit codes.
	a    []float32
	base float32
	qn   float32

	// 16x, 32x: y = R(q − origin), quantized to queryBits bits, yᵢ ≈ lo +
	// step·qqᵢ, as bit planes interleaved per word (planes[8w+k] is bit
	// k of the qq of word w's 64 dimensions: pop8's layout, one 64-byte
	// line per word); sumQQ = Σ qqᵢ. terms
	// caches each centroid's ‖q − c‖² (L2) or ⟨c, q⟩ (IP), valid where
	// its stamp equals gen (side by side: one cache miss, not two).
	y      []float32
	planes []uint64
	lo     float32
	step   float32
	sumQQ  float32
	terms  []termEntry
	gen    uint32
	pop8   pop8Func // 16x's and 32x's popcount, chosen by NewQuery
}

// queryBits is the precision of the 32x query: 8 bits (pop8's planes).
// The query is rotated about the data's mean, not about each
// vector's centroid, so its range spans the data rather than a cluster:
// 4 bits lost recall@10 on clustered data (docs/quantization.md).
const queryBits = 8

// NewQuery returns per-query state for c. avx512 lets 16x's and 32x's
// popcount use AVX-512 where the CPU has it (the same answers; the
// caller's choice, as for distance.Fast).
func (c *Codes) NewQuery(avx512 bool) *Query {
	q := &Query{c: c}
	q.pop8, _ = popKernel(avx512)
	switch c.level {
	case Level4x, Level5x, Level6x, Level8x:
		q.a = make([]float32, c.d)
	case Level16x, Level32x:
		q.a = make([]float32, c.d)
		q.y = make([]float32, c.d)
		q.planes = make([]uint64, queryBits*words(c.d))
		q.terms = make([]termEntry, c.k)
	}
	return q
}

// Reset prepares vec (len d, finite values) as the query.
func (q *Query) Reset(vec []float32) error {
	c := q.c
	if len(vec) != c.d {
		return fmt.Errorf("query has dimension %d; the codes have %d", len(vec), c.d)
	}
	for j, v := range vec {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("query component %d is %v", j, v)
		}
	}
	switch {
	case c.level.planes() > 0:
		q.resetPlanes(vec)
	case c.level.sqBits() > 0:
		q.reset4(vec)
	default:
		q.reset32(vec)
	}
	return nil
}

func (q *Query) reset4(vec []float32) {
	c := q.c
	if c.metric == faissfmt.MetricL2 {
		for j, v := range vec {
			q.a[j] = v - c.vmin[j]
		}
		return
	}
	q.resetSteps(vec)
}

// resetSteps sets a = q·step and base = Σ q·min, so ⟨q, x̂⟩ = base +
// Σ a·code.
func (q *Query) resetSteps(vec []float32) {
	c := q.c
	var base float64
	for j, v := range vec {
		q.a[j] = v * c.delta[j]
		base += float64(v) * float64(c.vmin[j])
	}
	q.base = float32(base)
}

func (q *Query) resetPlanes(vec []float32) {
	q.resetSteps(vec)
	var qn float64
	for _, v := range vec {
		qn += float64(v) * float64(v)
	}
	q.qn = float32(qn)
}

func (q *Query) reset32(vec []float32) {
	c := q.c
	q.reset4(vec)            // for the centroids' terms
	if q.gen++; q.gen == 0 { // wrapped: every stamp could look current
		clear(q.terms)
		q.gen = 1
	}
	y := q.y
	for j, v := range vec {
		y[j] = v - c.origin[j]
	}
	c.rot.apply(y)
	lo, hi := y[0], y[0]
	for _, v := range y {
		lo, hi = min(lo, v), max(hi, v)
	}
	const top = 1<<queryBits - 1
	q.lo = lo
	q.step = (hi - lo) / top
	clear(q.planes)
	var inv float32
	if q.step > 0 {
		inv = 1 / q.step
	}
	sum := 0
	for j, v := range y {
		qq := min(uint64((v-lo)*inv+0.5), top)
		sum += int(qq)
		w, b := j>>6, uint(j&63)
		for k := range queryBits {
			q.planes[queryBits*w+k] |= (qq >> k & 1) << b
		}
	}
	q.sumQQ = float32(sum)
}

// centroidTerm is centroid id's term of the estimate, ‖q − c‖² (L2) or
// ⟨c, q⟩ (IP), computed the first time the query meets the centroid.
func (q *Query) centroidTerm(id int) float32 {
	e := &q.terms[id]
	if e.stamp == q.gen {
		return e.term
	}
	c := q.c
	t := q.est4(c.cents[id*c.d : (id+1)*c.d])
	if c.metric == faissfmt.MetricInnerProduct { // ⟨c, q⟩, not −⟨c, q⟩
		t = -t
	}
	e.term, e.stamp = t, q.gen
	return t
}

// termEntry is a query's cached term for one centroid.
type termEntry struct {
	stamp uint32
	term  float32
}

// est4 is the estimate for an 8-bit code on vmin and delta (a 4x row, or
// a 16x or 32x centroid), once reset4 has prepared the query.
func (q *Query) est4(code []byte) float32 {
	if q.c.metric == faissfmt.MetricL2 {
		return l2U8(q.a, q.c.delta, code)
	}
	return -(q.base + dotU8(q.a, code))
}

// dot32 is G = Σᵢ (2bᵢ−1)·yᵢ for the sign bits of row, from the quantized
// query: Σᵢ (2bᵢ−1)·(lo + step·qqᵢ) = lo·C + step·(2·Σᵢ bᵢ·qqᵢ − Σᵢ qqᵢ).
func (q *Query) dot32(row []byte) float32 {
	bits := row[factorBytes:]
	t := q.pop8(q.planes, bits)
	return q.lo*f32(row[8:]) + q.step*(2*float32(t)-q.sumQQ)
}

// Dist is the estimated distance to vector v.
func (q *Query) Dist(v int32) float32 {
	c := q.c
	row := c.row(v)
	switch c.level {
	case Level4x:
		return q.est4(row)
	case Level8x:
		if c.metric == faissfmt.MetricL2 {
			return l2U4(q.a, c.delta, row)
		}
		return -(q.base + dotU4(q.a, row))
	case Level5x, Level6x:
		ip := q.base + dotPlanes(q.a, row, c.level.planes(), planeBytes(c.d))
		if c.metric == faissfmt.MetricL2 { // ‖q‖² − 2⟨q, x̂⟩ + ‖x̂‖²
			return q.qn - 2*ip + f32(row[len(row)-4:])
		}
		return -ip
	case Level16x:
		return q.est32(row, q.dot16(row))
	}
	return q.est32(row, q.dot32(row))
}

// dot16 is G = Σᵢ (cᵢ − 3/2)·yᵢ for the 2-bit codes c of row (planes of
// the low and the high bits), from the quantized query:
// lo·(Σᵢ cᵢ − 3d/2) + step·(Σᵢ cᵢ·qqᵢ − 3/2·Σᵢ qqᵢ), row's C being Σᵢ cᵢ.
func (q *Query) dot16(row []byte) float32 {
	bits := row[factorBytes:]
	wb := 8 * words(q.c.d)
	t := q.pop8(q.planes, bits) + 2*q.pop8(q.planes, bits[wb:])
	return q.lo*(f32(row[8:])-1.5*float32(q.c.d)) + q.step*(float32(t)-1.5*q.sumQQ)
}

// est32 is the 32x and 16x estimate for row given its G (dot32, dot16).
func (q *Query) est32(row []byte, g float32) float32 {
	t := q.centroidTerm(int(binary.LittleEndian.Uint16(row[12:])))
	if q.c.metric == faissfmt.MetricL2 {
		return f32(row) + t - f32(row[4:])*g
	}
	return -(t + f32(row) + 0.5*f32(row[4:])*g)
}

// DistBatch writes the estimated distances to ids into out[:len(ids)]:
// it first asks the CPU for every row, so their cache misses overlap,
// then computes.
func (q *Query) DistBatch(ids []int32, out []float32) {
	out = out[:len(ids)]
	for _, v := range ids {
		distance.Prefetch(q.c.row(v))
	}
	for i, v := range ids {
		out[i] = q.Dist(v)
	}
}
