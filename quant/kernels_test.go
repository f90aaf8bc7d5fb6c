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
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
)

// TestKernelsMatchGo: the kernels in use (assembly where available) agree
// with the Go reference within float tolerance (pop8 exactly), for every
// length from 0 to 300 and at d = 784.
func TestKernelsMatchGo(t *testing.T) {
	t.Logf("kernels: %s", kernelImpl)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range append(rangeN(0, 300), 784, 1000, 4096) {
		a, b := make([]float32, n), make([]float32, n)
		c := make([]byte, n+3)
		for j := range n {
			a[j], b[j] = float32(rng.NormFloat64()*100), float32(rng.Float64())
		}
		for j := range c {
			c[j] = byte(rng.Uint32())
		}
		cc := c[3 : 3+n] // unaligned
		tol := func(want float32) float64 { return 1e-5*math.Abs(float64(want)) + 1e-3 }
		want := l2U8Go(a, b, cc)
		assert.InDelta(t, want, l2U8(a, b, cc), tol(want), "l2U8 n=%d", n)
		want = dotU8Go(a, cc)
		var abs float64
		for j := range n {
			abs += math.Abs(float64(a[j]) * float64(cc[j]))
		}
		assert.InDelta(t, want, dotU8(a, cc), 1e-5*abs+1e-3, "dotU8 n=%d", n)

		c4 := c[3 : 3+(n+1)/2] // 4-bit codes, unaligned
		want = l2U4Go(a, b, c4)
		assert.InDelta(t, want, l2U4(a, b, c4), tol(want), "l2U4 n=%d", n)
		abs = 0
		for j := range n {
			abs += math.Abs(float64(a[j]) * float64(nibble(c4, j)))
		}
		assert.InDelta(t, dotU4Go(a, c4), dotU4(a, c4), 1e-5*abs+1e-3, "dotU4 n=%d", n)

		for p := 1; p <= 2; p++ { // 6x and 5x rows, unaligned
			pb := planeBytes(n)
			row := c[3:]
			if need := (n+1)/2 + p*pb; len(row) < need {
				row = make([]byte, need+3)[3:]
				for j := range row {
					row[j] = byte(rng.Uint32())
				}
			}
			abs = 0
			for j := range n {
				abs += math.Abs(float64(a[j])) * 63
			}
			assert.InDelta(t, dotPlanesGo(a, row, p, pb), dotPlanes(a, row, p, pb), 1e-5*abs+1e-3, "dotPlanes n=%d planes=%d", n, p)
		}

		// decodeU8: bit for bit (no fused multiply-add), on random and
		// on integer parameters.
		for _, ints := range []bool{false, true} {
			vmin, delta := a, b
			if ints {
				vmin, delta = make([]float32, n), make([]float32, n)
				for j := range n {
					vmin[j], delta[j] = float32(rng.IntN(200)-100), 1
				}
			}
			got, ref := make([]float32, n+1), make([]float32, n+1)
			got[n], ref[n] = -7, -7 // past dst's end: untouched
			decodeU8(got[:n], vmin, delta, cc)
			decodeU8Go(ref[:n], vmin, delta, cc)
			assert.Equal(t, ref, got, "decodeU8 n=%d integers=%v", n, ints)
			if ints {
				for j := range n {
					require.Equal(t, vmin[j]+float32(cc[j]), got[j], "decodeU8 n=%d j=%d", n, j)
				}
			}
		}

		w := (n + 63) / 64
		planes := make([]uint64, 8*w)
		for j := range planes {
			planes[j] = rng.Uint64()
		}
		x := make([]byte, 8*w+5)
		for j := range x {
			x[j] = byte(rng.Uint32())
		}
		for _, avx512 := range []bool{false, true} {
			pop8, impl := popKernel(avx512)
			assert.Equal(t, pop8Go(planes, x[5:]), pop8(planes, x[5:]), "pop8 %s words=%d", impl, w)
		}
	}
}

// TestKernels4BitExact: on small integers every product and partial sum
// is exact in float32, so any order of summation gives the same bits:
// the assembly must equal the Go reference (and a float64 reference)
// exactly. A nibble read from the wrong half, lane or byte changes the
// sum.
func TestKernels4BitExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range append(rangeN(0, 70), 127, 128, 129, 784, 1000) {
		a, b := make([]float32, n), make([]float32, n)
		for j := range n {
			a[j], b[j] = float32(rng.IntN(64)-32), float32(rng.IntN(8))
		}
		c := make([]byte, (n+1)/2+1)
		for j := range c {
			c[j] = byte(rng.Uint32())
		}
		c = c[1:]
		var l2, dot float64
		for j := range n {
			v := float64(c[j/2] >> (4 * (j % 2)) & 15)
			t := float64(a[j]) - float64(b[j])*v
			l2 += t * t
			dot += float64(a[j]) * v
		}
		require.Equal(t, float32(l2), l2U4Go(a, b, c), "Go l2U4 n=%d", n)
		require.Equal(t, float32(l2), l2U4(a, b, c), "%s l2U4 n=%d", kernelImpl, n)
		require.Equal(t, float32(dot), dotU4Go(a, c), "Go dotU4 n=%d", n)
		require.Equal(t, float32(dot), dotU4(a, c), "%s dotU4 n=%d", kernelImpl, n)
	}
}

func rangeN(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

// TestQueryAllocs: Reset and DistBatch allocate nothing.
func TestQueryAllocs(t *testing.T) {
	ds := fixture(t, "hnsw_flat_large")
	for _, lvl := range Levels {
		c := ds.build(t, lvl)
		q := c.NewQuery(true)
		ids := []int32{1, 5, 9, 400, 2999, 17, 18, 1000}
		out := make([]float32, len(ids))
		allocs := testing.AllocsPerRun(100, func() {
			if err := q.Reset(ds.q[3]); err != nil {
				panic(err)
			}
			q.DistBatch(ids, out)
			_ = q.Dist(7)
		})
		assert.Zero(t, allocs, "%s: Reset+DistBatch allocate nothing", lvl)
		for i, v := range ids {
			require.Equal(t, q.Dist(v), out[i], "DistBatch = Dist")
		}
	}
}

// synthetic codes of n random vectors for benchmarks.
func benchCodes(b *testing.B, n, d int, lvl Level) (*Codes, []float32, []float32) {
	rng := rand.New(rand.NewPCG(uint64(d), 9))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	raw := make([]byte, 4*len(x))
	for i, v := range x {
		putF32(raw[4*i:], v)
	}
	c, err := Build(bytesReader(raw), 0, n, d, faissfmt.MetricL2, lvl, BuildOptions{})
	require.NoError(b, err)
	b.Cleanup(func() { c.Close() })
	return c, x, x[:d]
}

// BenchmarkDist: ns per estimated distance over a working set far larger
// than the caches (random ids, batches of 16 like an HNSW hop), against
// the float L2 kernel on the float vectors.
func BenchmarkDist(b *testing.B) {
	for _, d := range []int{128, 784} {
		n := (256 << 20) / (4 * d) / 4 // float vectors: 64 MiB
		ids := make([]int32, 1<<16)
		rng := rand.New(rand.NewPCG(1, 1))
		for i := range ids {
			ids[i] = int32(rng.IntN(n))
		}
		out := make([]float32, 16)
		for _, lvl := range Levels {
			c, _, q := benchCodes(b, n, d, lvl)
			qs := c.NewQuery(true)
			require.NoError(b, qs.Reset(q))
			b.Run(fmt.Sprintf("d=%d/%s/%s", d, lvl, kernelImpl), func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					o := (i * 16) & (len(ids) - 1)
					qs.DistBatch(ids[o:o+16], out)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/vector")
			})
		}
		c, x, q := benchCodes(b, 1, d, Level4x)
		_ = c
		raw := make([]byte, 4*n*d)
		for i := range n * d {
			putF32(raw[4*i:], x[i%len(x)]+float32(i&7))
		}
		b.Run(fmt.Sprintf("d=%d/float-L2Fast", d), func(b *testing.B) {
			var s float32
			for i := 0; b.Loop(); i++ {
				o := (i * 16) & (len(ids) - 1)
				for _, v := range ids[o : o+16] {
					row := raw[int(v)*4*d : (int(v)+1)*4*d]
					distance.Prefetch(row)
				}
				for _, v := range ids[o : o+16] {
					s += fastKernels.L2(q, raw[int(v)*4*d:(int(v)+1)*4*d])
				}
			}
			_ = s
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/vector")
		})
	}
}

// BenchmarkKernels: the kernels alone on cached data, assembly vs Go.
func BenchmarkKernels(b *testing.B) {
	for _, d := range []int{128, 784} {
		a, w := make([]float32, d), make([]float32, d)
		c := make([]byte, d)
		planes := make([]uint64, 8*words(d))
		x := make([]byte, 8*words(d))
		for j := range d {
			a[j], w[j], c[j] = float32(j), 0.5, byte(j)
		}
		var s float32
		var u uint64
		b.Run(fmt.Sprintf("d=%d/l2U8/%s", d, kernelImpl), func(b *testing.B) {
			for b.Loop() {
				s += l2U8(a, w, c)
			}
		})
		b.Run(fmt.Sprintf("d=%d/l2U8/go", d), func(b *testing.B) {
			for b.Loop() {
				s += l2U8Go(a, w, c)
			}
		})
		b.Run(fmt.Sprintf("d=%d/dotU8/%s", d, kernelImpl), func(b *testing.B) {
			for b.Loop() {
				s += dotU8(a, c)
			}
		})
		b.Run(fmt.Sprintf("d=%d/dotU8/go", d), func(b *testing.B) {
			for b.Loop() {
				s += dotU8Go(a, c)
			}
		})
		b.Run(fmt.Sprintf("d=%d/l2U4/%s", d, kernelImpl), func(b *testing.B) {
			for b.Loop() {
				s += l2U4(a, w, c)
			}
		})
		b.Run(fmt.Sprintf("d=%d/l2U4/go", d), func(b *testing.B) {
			for b.Loop() {
				s += l2U4Go(a, w, c)
			}
		})
		pop8, popImpl := popKernel(true)
		b.Run(fmt.Sprintf("d=%d/pop8/%s", d, popImpl), func(b *testing.B) {
			for b.Loop() {
				u += pop8(planes, x)
			}
		})
		b.Run(fmt.Sprintf("d=%d/pop8/go", d), func(b *testing.B) {
			for b.Loop() {
				u += pop8Go(planes, x)
			}
		})
		fx := make([]byte, 4*d)
		b.Run(fmt.Sprintf("d=%d/float-L2Fast/%s", d, fastKernels.Impl), func(b *testing.B) {
			for b.Loop() {
				s += fastKernels.L2(a, fx)
			}
		})
		_, _ = s, u
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// TestDotPlanesExact: on small integer weights the planes kernel equals
// Σ w·code computed from the codes it was given, bit for bit, for every
// code value in every lane: a bit read from the wrong plane, lane or byte
// changes the sum.
func TestDotPlanesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, planes := range []int{1, 2} {
		top := 1<<(4+planes) - 1
		for _, n := range []int{1, 7, 8, 9, 16, 31, 128, 784} {
			codes := make([]int, n)
			w := make([]float32, n)
			for j := range n {
				codes[j] = (j*7 + rng.IntN(top+1)) % (top + 1)
				w[j] = float32(rng.IntN(9) - 4)
			}
			nib, pb := (n+1)/2, planeBytes(n)
			row := make([]byte, nib+planes*pb)
			var want int64
			for j, code := range codes {
				row[j>>1] |= byte(code>>planes) << (4 * (j & 1))
				for p := range planes {
					row[nib+p*pb+j>>3] |= byte(code>>p&1) << (j & 7)
				}
				want += int64(w[j]) * int64(code)
			}
			require.Equal(t, float32(want), dotPlanesGo(w, row, planes, pb), "Go n=%d planes=%d", n, planes)
			require.Equal(t, float32(want), dotPlanes(w, row, planes, pb), "%s n=%d planes=%d", kernelImpl, n, planes)
		}
	}
}
