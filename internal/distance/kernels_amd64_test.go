//go:build !purego

package distance

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"
)

// at returns a slice of n bytes of buf starting at an address ≡ off mod 64.
func at(buf []byte, off, n int) []byte {
	a := int(uintptr(unsafe.Pointer(&buf[0])) & 63)
	s := (off - a + 64) & 63
	return buf[s : s+n]
}

// TestAVX512MatchesAVX2: the AVX-512 kernels return the AVX2 kernels' bits
// for every dimension up to 300 (and 784, 1023), x at every offset within
// a cache line, q on and off a line — including NaN, ±Inf and subnormal
// components, where any change in lane order would show.
func TestAVX512MatchesAVX2(t *testing.T) {
	if !hasAVX512() {
		t.Skip("no AVX-512 F and DQ on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 4))
	qbuf, xbuf := make([]byte, 4*1024+128), make([]byte, 4*1024+128)
	dims := []int{784, 1023}
	for d := range 301 {
		dims = append(dims, d)
	}
	for _, d := range dims {
		for _, qoff := range []int{0, 4, 60} {
			for xoff := range 64 {
				q, x := at(qbuf, qoff, 4*d), at(xbuf, xoff, 4*d)
				for j := range d {
					v, w := float32(r.NormFloat64()*1e3), float32(r.NormFloat64())
					switch r.IntN(200) {
					case 0:
						w = float32(math.NaN())
					case 1:
						w = float32(math.Inf(1 - 2*r.IntN(2)))
					case 2:
						w = math.Float32frombits(r.Uint32() & 0x807fffff) // subnormal
					}
					binary.LittleEndian.PutUint32(q[4*j:], math.Float32bits(v))
					binary.LittleEndian.PutUint32(x[4*j:], math.Float32bits(w))
				}
				var qp, xp *byte
				if d > 0 {
					qp, xp = &q[0], &x[0]
				}
				for _, k := range []struct {
					name      string
					avx2, new func(q, x *byte, n int) float32
				}{{"l2", l2AVX2, l2AVX512}, {"ip", ipAVX2, ipAVX512}} {
					want, got := k.avx2(qp, xp, d), k.new(qp, xp, d)
					if math.Float32bits(want) != math.Float32bits(got) {
						t.Fatalf("%s d=%d q at %d, x at %d mod 64: AVX-512 %v (%#x), AVX2 %v (%#x)",
							k.name, d, qoff, xoff, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	}
}

// BenchmarkKernelsL1 times one 784-d distance on L1-resident data, the query
// on a cache line and the vector on one or at 58 mod 64 (where FAISS files
// put vectors), for the AVX2 and AVX-512 kernels. The four run in turns of
// 20,000 calls, 101 turns each, so all see the same neighbours on this
// shared machine; it reports each one's median ns per distance.
//
//	go test -run='^$' -bench=KernelsL1 -benchtime 1x ./internal/distance
func BenchmarkKernelsL1(b *testing.B) {
	if !hasAVX512() {
		b.Skip("no AVX-512 F and DQ on this CPU")
	}
	const d, calls, turns = 784, 20000, 101
	q := at(make([]byte, 4*d+64), 0, 4*d)
	for j := range d {
		binary.LittleEndian.PutUint32(q[4*j:], math.Float32bits(float32(j)))
	}
	type config struct {
		name string
		f    func(q, x *byte, n int) float32
		x    []byte
	}
	var cs []config
	for _, off := range []int{0, 58} {
		x := at(make([]byte, 4*d+64), off, 4*d)
		for j := range d {
			binary.LittleEndian.PutUint32(x[4*j:], math.Float32bits(float32(d-j)))
		}
		cs = append(cs, config{"avx2-x-at-" + strconv.Itoa(off), l2AVX2, x},
			config{"avx512-x-at-" + strconv.Itoa(off), l2AVX512, x})
	}
	ns := make([][]float64, len(cs))
	var sink float32
	for b.Loop() {
		for range turns {
			for i, c := range cs {
				start := time.Now()
				for range calls {
					sink += c.f(&q[0], &c.x[0], d)
				}
				ns[i] = append(ns[i], float64(time.Since(start).Nanoseconds())/calls)
			}
		}
	}
	for i, c := range cs {
		slices.Sort(ns[i])
		b.ReportMetric(ns[i][len(ns[i])/2], c.name+"-ns")
	}
	_ = sink
}

// FuzzAVX512MatchesAVX2: any bit patterns (NaN payloads, subnormals,
// infinities), any dimension and any offset of x within a cache line give
// the AVX2 kernels' bits.
func FuzzAVX512MatchesAVX2(f *testing.F) {
	if !hasAVX512() {
		f.Skip("no AVX-512 F and DQ on this CPU")
	}
	f.Add([]byte("\x00\x00\x80\x7f\x01\x00\xc0\x7f\x00\x00\x80\x3f\x00\x00\x00\x00"), uint8(58))
	f.Add(make([]byte, 8*40), uint8(2))
	qbuf, xbuf := make([]byte, 4096+64), make([]byte, 4096+64)
	f.Fuzz(func(t *testing.T, data []byte, off uint8) {
		d := min(len(data)/8, 1024)
		if d == 0 {
			return
		}
		q, x := at(qbuf, 0, 4*d), at(xbuf, int(off)%64, 4*d)
		copy(q, data[:4*d])
		copy(x, data[4*d:8*d])
		for _, k := range []struct {
			name      string
			avx2, new func(q, x *byte, n int) float32
		}{{"l2", l2AVX2, l2AVX512}, {"ip", ipAVX2, ipAVX512}} {
			want, got := k.avx2(&q[0], &x[0], d), k.new(&q[0], &x[0], d)
			if math.Float32bits(want) != math.Float32bits(got) {
				t.Fatalf("%s d=%d x at %d mod 64: AVX-512 %#x, AVX2 %#x", k.name, d, off%64, math.Float32bits(got), math.Float32bits(want))
			}
		}
	})
}

// TestFast: Fast chooses AVX-512 only when asked, where the CPU has it
// and the build allows it, and AVX2 otherwise; Impl names the kernels it
// returns.
func TestFast(t *testing.T) {
	if !simd {
		if k := Fast(true); k.Impl != "go" {
			t.Fatalf("Fast(true) without AVX2 and FMA = %q, want go", k.Impl)
		}
		t.Skip("no AVX2 and FMA on this CPU")
	}
	same := func(f, g any) bool { return reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer() }
	avx2 := func(k Kernels) bool {
		return k.Impl == "avx2" && same(k.L2, l2BytesAVX2) && same(k.IP, ipBytesAVX2) && same(k.L2F, l2FloatsAVX2) && same(k.IPF, ipFloatsAVX2)
	}
	if k := Fast(false); !avx2(k) {
		t.Fatalf("Fast(false) = %q: want the AVX2 kernels", k.Impl)
	}
	k := Fast(true)
	if !hasAVX512() || !avx512Build {
		if !avx2(k) {
			t.Fatalf("Fast(true) without AVX-512 (CPU %v, build %v) = %q: want the AVX2 kernels", hasAVX512(), avx512Build, k.Impl)
		}
		return
	}
	if k.Impl != "avx512" || !same(k.L2, l2BytesAVX512) || !same(k.IP, ipBytesAVX512) || !same(k.L2F, l2FloatsAVX512) || !same(k.IPF, ipFloatsAVX512) {
		t.Fatalf("Fast(true) = %q: want the AVX-512 kernels", k.Impl)
	}
}
