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

// TestSetAVX512: SetAVX512 switches the float kernels behind L2Fast and
// IPFast between AVX-512 (where the CPU has it) and AVX2, and FastImpl names
// the one in use.
func TestSetAVX512(t *testing.T) {
	if FastImpl == "go" {
		t.Skip("no AVX2 and FMA on this CPU")
	}
	if want := map[bool]string{true: "avx512", false: "avx2"}[hasAVX512() && avx512Build]; FastImpl != want {
		t.Fatalf("FastImpl at start-up = %q, want %q (noavx512 build: %v)", FastImpl, want, !avx512Build)
	}
	t.Cleanup(func() { SetAVX512(avx512Build) })
	same := func(f, g func(q, x *byte, n int) float32) bool {
		return reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer()
	}
	if got := SetAVX512(false); got != "avx2" || !same(l2Kernel, l2AVX2) || !same(ipKernel, ipAVX2) {
		t.Fatalf("SetAVX512(false) = %q: want the AVX2 kernels", got)
	}
	got := SetAVX512(true)
	if !hasAVX512() {
		if got != "avx2" || !same(l2Kernel, l2AVX2) {
			t.Fatalf("SetAVX512(true) without AVX-512 = %q: want the AVX2 kernels", got)
		}
		return
	}
	if got != "avx512" || !same(l2Kernel, l2AVX512) || !same(ipKernel, ipAVX512) {
		t.Fatalf("SetAVX512(true) = %q: want the AVX-512 kernels", got)
	}
}
