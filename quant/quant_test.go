package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
)

func TestParseLevel(t *testing.T) {
	for s, want := range map[string]Level{"4x": Level4x, "5x": Level5x, "6x": Level6x, "8x": Level8x, "16x": Level16x, "32x": Level32x} {
		l, err := ParseLevel(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, l)
		assert.Equal(t, s, l.String())
	}
	assert.Equal(t, []Level{Level4x, Level5x, Level6x, Level8x, Level16x, Level32x}, Levels, "finest first")
	for _, s := range []string{"", "auto", "12x", "1x", "16X", "016x", "x4", " 32x", "4X", "8X", "32x ", "08x", "5.3x"} { // exactly as documented
		_, err := ParseLevel(s)
		assert.ErrorContains(t, err, "unknown compression level", s)
		assert.ErrorContains(t, err, "want 4x, 5x, 6x, 8x, 16x, 32x", s)
	}
	assert.Equal(t, "level(12)", Level(12).String())
}

func TestBytesPerVector(t *testing.T) {
	assert.Equal(t, 784, Level4x.BytesPerVector(784))
	assert.Equal(t, 392, Level8x.BytesPerVector(784))
	assert.Equal(t, 64, Level8x.BytesPerVector(128))
	assert.Equal(t, 2, Level8x.BytesPerVector(3), "an odd dimension takes a half byte")
	assert.Equal(t, 1, Level8x.BytesPerVector(1))
	assert.Equal(t, 14+8*13, Level32x.BytesPerVector(784), "784 bits in 13 words plus 3 factors and a centroid")
	assert.Equal(t, 14+16, Level32x.BytesPerVector(128))
	assert.Equal(t, 14+8, Level32x.BytesPerVector(1))
	assert.Equal(t, 14+2*16, Level16x.BytesPerVector(128), "two planes of 128 bits")
	assert.Equal(t, 14+2*8*13, Level16x.BytesPerVector(784))
	assert.Equal(t, 64+2*16+4, Level5x.BytesPerVector(128), "nibbles, two bit planes, ‖x̂‖²")
	assert.Equal(t, 64+16+4, Level6x.BytesPerVector(128), "nibbles, one bit plane, ‖x̂‖²")
	assert.Equal(t, 392+98+4, Level6x.BytesPerVector(784))
	assert.Equal(t, 2+2*1+4, Level5x.BytesPerVector(3))
	assert.Zero(t, Level4x.BytesPerVector(0))
	assert.Zero(t, Level(7).BytesPerVector(10))
}

func TestDefaultOversample(t *testing.T) {
	assert.Equal(t, 5.0, DefaultOversample(Level4x, 784))
	assert.Equal(t, 5.0, DefaultOversample(Level32x, 1000))
	assert.Equal(t, 2.0, DefaultOversample(Level4x, 1536))
	assert.Equal(t, 5.0, DefaultOversample(Level8x, 128))
	assert.Equal(t, 2.0, DefaultOversample(Level8x, 1536))
	assert.Equal(t, 3.0, DefaultOversample(Level32x, 1536))
	assert.Equal(t, 3.0, DefaultOversample(Level16x, 1536))
}

// TestRotatorOrthogonal: the rotation keeps norms and inner products, for
// powers of two and not, and is not the identity.
func TestRotatorOrthogonal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{1, 2, 3, 24, 64, 100, 784, 1024, 1000} {
		r := newRotator(d, 7)
		x, y := make([]float32, d), make([]float32, d)
		for j := range x {
			x[j], y[j] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		ip0, n0 := dot64(x, y), dot64(x, x)
		rx, ry := append([]float32(nil), x...), append([]float32(nil), y...)
		r.apply(rx)
		r.apply(ry)
		assert.InEpsilon(t, n0, dot64(rx, rx), 1e-5, "d=%d norm", d)
		assert.InDelta(t, ip0, dot64(rx, ry), 1e-4*math.Sqrt(n0*dot64(y, y)), "d=%d inner product", d)
		if d >= 24 {
			moved := 0
			for j := range x {
				if math.Abs(float64(rx[j]-x[j])) > 1e-3 {
					moved++
				}
			}
			assert.Greater(t, moved, d/2, "d=%d: the rotation moves most coordinates", d)
		}
	}
}

func dot64(a, b []float32) float64 {
	var s float64
	for j := range a {
		s += float64(a[j]) * float64(b[j])
	}
	return s
}

// TestEstimatesFixtures: on FAISS's own float fixtures, the estimates
// track exact distances (4x closely), and "top R by estimate, then exact
// rerank" finds the true top 10.
func TestEstimatesFixtures(t *testing.T) {
	for _, name := range []string{"hnsw_flat_l2", "hnsw_flat_ip", "hnsw_flat_large", "flat_l2", "flat_ip"} {
		ds := fixture(t, name)
		for _, lvl := range Levels {
			t.Run(fmt.Sprintf("%s/%s", name, lvl), func(t *testing.T) {
				c := ds.build(t, lvl)
				n, d := c.Shape()
				require.Equal(t, int64(ds.n), n)
				require.Equal(t, ds.d, d)
				// Relative error of the estimate, normalized by the spread of
				// exact distances for the query.
				q := c.NewQuery(true)
				var errSum, spreadSum float64
				for _, v := range ds.q[:20] {
					require.NoError(t, q.Reset(v))
					var ex []float64
					for i := range ds.n {
						e := ds.exact(v, i)
						ex = append(ex, e)
						errSum += math.Abs(float64(q.Dist(int32(i))) - e)
					}
					spreadSum += stddev(ex) * float64(ds.n)
				}
				rel := errSum / spreadSum
				rec := rerankRecall(ds, c, 10, []int{10, 50}, ds.exact)
				t.Logf("%s %s: mean |est−exact| / sd(exact) = %.4f, recall@10 R=10: %.3f, R=50: %.3f", name, lvl, rel, rec[0], rec[1])
				switch lvl {
				case Level4x:
					assert.Less(t, rel, 0.02, "8-bit estimates are close")
					assert.GreaterOrEqual(t, rec[0], 0.9, "4x without oversampling")
					assert.GreaterOrEqual(t, rec[1], 0.99, "4x with 5× oversampling")
				case Level5x, Level6x: // a quarter, a half of 8x's step
					assert.Less(t, rel, map[Level]float64{Level5x: 0.04, Level6x: 0.07}[lvl], "6- and 5-bit estimates are close")
					assert.GreaterOrEqual(t, rec[0], 0.85, "%s without oversampling", lvl)
					assert.GreaterOrEqual(t, rec[1], 0.99, "%s with 5× oversampling", lvl)
				case Level8x:
					assert.Less(t, rel, 0.12, "4-bit estimates are close")
					assert.GreaterOrEqual(t, rec[0], 0.75, "8x without oversampling")
					assert.GreaterOrEqual(t, rec[1], 0.99, "8x with 5× oversampling")
				default:
					assert.Less(t, rel, 0.5, "1-bit estimates track exact distances")
					assert.GreaterOrEqual(t, rec[1], 0.85, "32x with 5× oversampling")
				}
			})
		}
	}
}

func stddev(x []float64) float64 {
	var s, s2 float64
	for _, v := range x {
		s += v
		s2 += v * v
	}
	m := s / float64(len(x))
	return math.Sqrt(max(0, s2/float64(len(x))-m*m))
}

// TestUnbiasedRaBitQ: for 16x and 32x, over many query–vector pairs and several random
// rotations, the mean of (estimate − exact) is near zero relative to the
// spread of that error, for L2 and inner product. The estimator is
// unbiased over the rotation: under one rotation each vector's error is a
// fixed linear function of the query, so a few rotations are pooled.
func TestUnbiasedRaBitQ(t *testing.T) {
	for _, lvl := range []Level{Level16x, Level32x} {
		for _, name := range []string{"hnsw_flat_large", "hnsw_flat_ip", "hnsw_flat_l2"} {
			ds := fixture(t, name)
			var errs []float64
			for seed := range uint64(8) {
				c, err := Build(ds.r, ds.off, ds.n, ds.d, ds.metric, lvl, BuildOptions{Seed: seed + 1})
				require.NoError(t, err)
				q := c.NewQuery(true)
				for _, v := range ds.q {
					require.NoError(t, q.Reset(v))
					for i := range ds.n {
						errs = append(errs, float64(q.Dist(int32(i)))-ds.exact(v, i))
					}
				}
				c.Close()
			}
			var m float64
			for _, e := range errs {
				m += e
			}
			m /= float64(len(errs))
			sd := stddev(errs)
			t.Logf("%s %s: %d pairs, mean error %.4g, sd %.4g, mean/sd %.4f", lvl, name, len(errs), m, sd, m/sd)
			assert.Less(t, math.Abs(m), 0.05*sd, "%s %s: the estimate is unbiased", lvl, name)
		}
	}
}

// TestMetricsConvention: estimates follow the search's convention
// (smaller is nearer): squared L2, and −inner product.
func TestMetricsConvention(t *testing.T) {
	ds := fixture(t, "hnsw_flat_ip")
	require.Equal(t, faissfmt.MetricInnerProduct, ds.metric)
	c := ds.build(t, Level4x)
	q := c.NewQuery(true)
	require.NoError(t, q.Reset(ds.q[0]))
	e := ds.exact(ds.q[0], 5)
	assert.InDelta(t, e, float64(q.Dist(5)), 0.02*math.Abs(e)+0.05)
	assert.Less(t, e, 0.0, "−inner product of correlated vectors is negative here")
}

// TestClipRange: on a Gaussian sample with a few far outliers, the 8x
// range leaves the outliers out (they clamp) and its 16-level error is
// well below the min/max range's; on a uniform sample over [0, 1] the 16
// levels sit at the centres of 16 equal bins (the least-error uniform
// quantizer: ends 1/32 and 31/32); a constant sample gives a zero-width
// range.
func TestClipRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	s := make([]float32, 10000)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	s[17], s[4000] = 40, -25
	sse := func(lo, hi float32) float64 {
		step := (hi - lo) / 15
		var e float64
		for _, v := range s {
			q := min(max(math.Round(float64((v-lo)/step)), 0), 15)
			r := float64(lo) + q*float64(step)
			e += (float64(v) - r) * (float64(v) - r)
		}
		return e
	}
	lo, hi := clipRange(s, 16) // sorts s
	assert.Equal(t, float32(-25), s[0])
	assert.Equal(t, float32(40), s[len(s)-1])
	t.Logf("range [%.3f, %.3f]; error %.1f against min/max's %.1f", lo, hi, sse(lo, hi), sse(-25, 40))
	assert.Greater(t, lo, float32(-5))
	assert.Less(t, hi, float32(5))
	assert.Greater(t, hi-lo, float32(4), "the bulk keeps its levels")
	assert.Less(t, sse(lo, hi), sse(-25, 40)/5)

	for i := range s {
		s[i] = float32(rng.Float64())
	}
	lo, hi = clipRange(s, 16)
	assert.InDelta(t, 1.0/32, lo, 0.01)
	assert.InDelta(t, 31.0/32, hi, 0.01)

	for i := range s {
		s[i] = 3
	}
	lo, hi = clipRange(s, 16)
	assert.Equal(t, float32(3), lo)
	assert.Equal(t, float32(3), hi)
}

// TestEncode8: codes are round((x−lo)/step) clamped to [0, 15], the even
// dimension in the low nibble; a dimension with a zero step codes 0 and
// estimates its lower end exactly.
func TestEncode8(t *testing.T) {
	c := &Codes{level: Level8x, d: 3, vmin: []float32{0, -1, 5}, delta: []float32{1, 0.5, 0}}
	dst := []byte{0xff, 0xff}
	c.encode8(dst, []float32{3.4, 100, 7})
	assert.Equal(t, []byte{0x3 | 0xf<<4, 0x0}, dst)
	c.encode8(dst, []float32{-9, -0.74, 5})
	assert.Equal(t, []byte{0x0 | 0x1<<4, 0x0}, dst)
}

// TestEncodePlanes: a 6-bit (5x) code keeps its high 4 bits as 8x's
// nibbles and its low 2 bits as two bit planes, clamped to [0, 63], with
// ‖x̂‖² after them; the 5-bit (6x) code has one plane.
func TestEncodePlanes(t *testing.T) {
	c := &Codes{level: Level5x, d: 3, vmin: []float32{0, -1, 5}, delta: []float32{1, 0.5, 0}}
	dst := bytes.Repeat([]byte{0xff}, Level5x.BytesPerVector(3))
	// codes 45 = 0b1011_01, 63 (clamped), 0 (a constant dimension)
	c.encodePlanes(dst, []float32{45.2, 100, 7})
	assert.Equal(t, []byte{0xb | 0xf<<4, 0x0, 0b011, 0b010}, dst[:4])
	assert.Equal(t, float32(45*45+30.5*30.5+5*5), f32(dst[4:]), "‖x̂‖² of (45, −1+0.5·63, 5)")
	c.encodePlanes(dst, []float32{-3, -0.74, 5}) // codes 0, 1 (−0.74 rounds to −1 + 0.5)
	assert.Equal(t, []byte{0x0, 0x0, 0b010, 0b000}, dst[:4])

	c.level = Level6x
	dst = dst[:Level6x.BytesPerVector(3)]
	c.encodePlanes(dst, []float32{45.2, 100, 7}) // clamped to 31 = 0b1111_1
	assert.Equal(t, []byte{0xf | 0xf<<4, 0x0, 0b011}, dst[:3])
}

// TestPlanesEstimate: a 5x or 6x estimate is the exact distance from the
// query to the vector its code decodes to (x̂ = lo + step·code), computed
// here from the row's nibbles and planes.
func TestPlanesEstimate(t *testing.T) {
	for _, name := range []string{"hnsw_flat_l2", "hnsw_flat_ip"} {
		ds := fixture(t, name)
		for _, lvl := range []Level{Level5x, Level6x} {
			c := ds.build(t, lvl)
			q := c.NewQuery(true)
			p := lvl.planes()
			nib, pb := (ds.d+1)/2, planeBytes(ds.d)
			for _, v := range ds.q[:5] {
				require.NoError(t, q.Reset(v))
				for i := range min(ds.n, 200) {
					row := c.row(int32(i))
					var want, norm float64
					for j := range ds.d {
						code := int(row[j>>1]>>(4*(j&1))&15) << p
						for b := range p {
							code |= int(row[nib+b*pb+j>>3]>>(j&7)&1) << b
						}
						x := float64(c.vmin[j]) + float64(c.delta[j])*float64(code)
						norm += x * x
						if c.metric == faissfmt.MetricL2 {
							want += (float64(v[j]) - x) * (float64(v[j]) - x)
						} else {
							want -= float64(v[j]) * x
						}
					}
					if c.metric == faissfmt.MetricL2 {
						assert.InDelta(t, norm, f32(row[len(row)-4:]), 1e-3*max(1, norm), "stored ‖x̂‖²")
					}
					assert.InDelta(t, want, q.Dist(int32(i)), 1e-3*max(1, math.Abs(want)), "%s %s vector %d", name, lvl, i)
				}
			}
		}
	}
}

// TestCellTree: on well-separated Gaussian blobs, the two-level tree finds
// for almost every point a centroid as near as the nearest of all (a
// coarse cell can miss the best fine centroid only near a cell's border),
// keeps to the count asked, and each centroid sits inside a blob.
func TestCellTree(t *testing.T) {
	const d, blobs, per, k = 16, 40, 100, 200
	rng := rand.New(rand.NewPCG(1, 2))
	centres := make([]float32, blobs*d)
	for i := range centres {
		centres[i] = float32(rng.NormFloat64() * 10)
	}
	m := blobs * per
	x := make([]float32, m*d)
	for i := range m {
		for j := range d {
			x[i*d+j] = centres[(i%blobs)*d+j] + float32(rng.NormFloat64())
		}
	}
	tr := trainCells(fastKernels.L2F, x, m, d, k, 2, rng)
	kf := len(tr.fine) / d
	assert.LessOrEqual(t, kf, k)
	assert.Greater(t, kf, k/2)
	assert.Equal(t, kf, tr.first[len(tr.first)-1])
	good := 0
	for i := range m {
		v := x[i*d : (i+1)*d]
		got := fastKernels.L2F(v, tr.fine[tr.nearest(v)*d:])
		best := fastKernels.L2F(v, tr.fine[nearestRow(fastKernels.L2F, v, tr.fine, d, 0, kf)*d:])
		if got <= best*1.05 {
			good++
		}
	}
	assert.Greater(t, float64(good)/float64(m), 0.95, "the tree's centroid is (nearly) the nearest")
	for c := range kf { // every centroid is within a few spreads of a blob centre
		near := float32(math.Inf(1))
		for b := range blobs {
			near = min(near, fastKernels.L2F(tr.fine[c*d:(c+1)*d], centres[b*d:(b+1)*d]))
		}
		assert.Less(t, near, float32(4*d), "centroid %d lies in a blob", c)
	}
	// Fewer points than centroids: at most one centroid a point (a cell's
	// share can exceed its points; Build asks at most a quarter of them).
	small := trainCells(fastKernels.L2F, x[:5*d], 5, d, 50, 1, rng)
	assert.LessOrEqual(t, len(small.fine)/d, 5)
	assert.GreaterOrEqual(t, len(small.fine)/d, 3)
}

// TestQueryGenerationWrap: a query whose generation counter wraps clears
// its cached centroid terms rather than reusing ones from 2³² queries
// ago.
func TestQueryGenerationWrap(t *testing.T) {
	ds := fixture(t, "hnsw_flat_l2")
	c := ds.build(t, Level32x)
	fresh, old := c.NewQuery(true), c.NewQuery(true)
	require.NoError(t, old.Reset(ds.q[1]))
	for i := range ds.n {
		old.Dist(int32(i)) // fill the cache with q[1]'s terms
	}
	old.gen = math.MaxUint32 // the next Reset wraps to 0
	require.NoError(t, old.Reset(ds.q[0]))
	require.NoError(t, fresh.Reset(ds.q[0]))
	for i := range ds.n {
		require.Equal(t, fresh.Dist(int32(i)), old.Dist(int32(i)), "vector %d", i)
	}
}

// TestCellTreeDuplicates: repeated rows give fewer distinct points than
// centroids asked; the tree returns at most k (a guide with more than
// maxCentroids would not load), drops the centroids no row reaches, and
// all-equal rows give one centroid.
func TestCellTreeDuplicates(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, vals := range []int{1, 8, 200} {
		const d, m, k = 2, 1024, 128
		x := make([]float32, m*d)
		for i := range m {
			x[i*d] = float32((i % vals) * 1000)
		}
		tr := trainCells(fastKernels.L2F, x, m, d, k, 2, rng)
		kf := len(tr.fine) / d
		assert.LessOrEqual(t, kf, min(k, vals), "%d distinct rows", vals)
		assert.Equal(t, kf, tr.first[len(tr.first)-1])
		for i := 1; i < len(tr.first); i++ {
			assert.Greater(t, tr.first[i], tr.first[i-1], "cell %d has a fine centroid", i-1)
		}
		for i := range m { // every row finds its own value
			if vals > k {
				break
			}
			v := x[i*d : (i+1)*d]
			assert.Zero(t, fastKernels.L2F(v, tr.fine[tr.nearest(v)*d:(tr.nearest(v)+1)*d]), "%d distinct rows, row %d", vals, i)
		}
	}
}
