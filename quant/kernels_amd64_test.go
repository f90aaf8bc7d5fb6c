//go:build !purego

package quant

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/cpu"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
)

// TestPop8Kernels: every pop8 kernel this CPU can run (not only the one
// init chose) equals a per-dimension reference, Σᵢ bᵢ·qqᵢ, and pop8Go,
// for 0 to 20 words and all-ones inputs (the largest sums).
func TestPop8Kernels(t *testing.T) {
	kernels := pop8Kernels()
	t.Logf("kernels: %d (go, popcnt, avx512 where the CPU has them)", len(kernels))
	rng := rand.New(rand.NewPCG(8, 8))
	for w := range 21 {
		for _, ones := range []bool{false, true} {
			planes := make([]uint64, 8*w)
			x := make([]byte, 8*w)
			for i := range planes {
				planes[i] = rng.Uint64()
				if ones {
					planes[i] = ^uint64(0)
				}
			}
			for i := range x {
				x[i] = byte(rng.Uint32())
				if ones {
					x[i] = 0xff
				}
			}
			var want uint64 // Σᵢ bᵢ·qqᵢ over the 64·w dimensions
			for i := range 64 * w {
				if x[i/8]>>(i%8)&1 == 0 {
					continue
				}
				for k := range 8 {
					want += (planes[8*(i/64)+k] >> (i % 64) & 1) << k
				}
			}
			if ones {
				assert.Equal(t, uint64(64*w*255), want)
			}
			for name, k := range kernels {
				assert.Equal(t, want, k(planes, x), "%s, %d words, ones %v", name, w, ones)
			}
		}
	}
}

// pop8Kernels is every pop8 kernel this CPU runs, by name.
func pop8Kernels() map[string]func([]uint64, []byte) uint64 {
	kernels := map[string]func([]uint64, []byte) uint64{"go": pop8Go}
	if cpu.X86.HasPOPCNT {
		kernels["popcnt"] = pop8POPCNTAsm
	}
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPOPCNTDQ {
		kernels["avx512"] = pop8AVX512Asm
	}
	return kernels
}

// BenchmarkPop8: each pop8 kernel at d = 128 and 784 (in cache).
func BenchmarkPop8(b *testing.B) {
	for _, d := range []int{128, 784} {
		planes := make([]uint64, 8*words(d))
		x := make([]byte, 8*words(d))
		for i := range planes {
			planes[i] = uint64(i) * 0x9e3779b97f4a7c15
		}
		for i := range x {
			x[i] = byte(i * 37)
		}
		for name, k := range pop8Kernels() {
			b.Run(fmt.Sprintf("d=%d/%s", d, name), func(b *testing.B) {
				var u uint64
				for b.Loop() {
					u += k(planes, x)
				}
				pop8Sink = u
			})
		}
	}
}

// pop8Sink keeps BenchmarkPop8's sums alive.
var pop8Sink uint64

// TestQueryAVX512: NewQuery picks pop8 (AVX-512 only when asked and the
// CPU has it, POPCNT otherwise) and the estimates do not change.
func TestQueryAVX512(t *testing.T) {
	ds := fixture(t, "hnsw_flat_l2")
	c := ds.build(t, Level16x)
	var want []float32
	for _, on := range []bool{false, true} {
		q := c.NewQuery(on)
		_, impl := popKernel(on)
		switch {
		case on && distance.Fast(true).Impl == "avx512" && cpu.X86.HasAVX512VPOPCNTDQ:
			assert.Equal(t, "avx512", impl)
			assert.Equal(t, reflect.ValueOf(pop8AVX512Asm).Pointer(), reflect.ValueOf(q.pop8).Pointer())
		case cpu.X86.HasPOPCNT:
			assert.Equal(t, "popcnt", impl)
			assert.Equal(t, reflect.ValueOf(pop8POPCNTAsm).Pointer(), reflect.ValueOf(q.pop8).Pointer())
		default:
			assert.Equal(t, "go", impl)
		}
		assert.NoError(t, q.Reset(ds.q[0]))
		if want == nil {
			want = make([]float32, ds.n)
			for i := range want {
				want[i] = q.Dist(int32(i))
			}
			continue
		}
		for i := range want {
			assert.Equal(t, want[i], q.Dist(int32(i)), "%s, vector %d", impl, i)
		}
	}
}
