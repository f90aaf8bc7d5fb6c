package distance

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func toBytes(x []float32, shift int) []byte {
	b := make([]byte, shift+4*len(x)) // shift: unaligned, as in FAISS sections
	for j, v := range x {
		binary.LittleEndian.PutUint32(b[shift+4*j:], math.Float32bits(v))
	}
	return b[shift:]
}

func ref(q, x []float32, l2 bool) float64 {
	var s float64
	for j := range q {
		if l2 {
			t := float64(q[j]) - float64(x[j])
			s += t * t
		} else {
			s += float64(q[j]) * float64(x[j])
		}
	}
	return s
}

// TestKernelsAgree: exact, the Go fast kernel and (on amd64) the AVX2 and
// AVX-512 kernels (Fast off and on) agree with a float64 reference on odd
// dimensions and unaligned data.
func TestKernelsAgree(t *testing.T) {
	for _, on := range []bool{false, true} {
		fk := Fast(on)
		t.Logf("Fast(%v): %s", on, fk.Impl)
		r := rand.New(rand.NewPCG(1, 2))
		for _, d := range []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 768, 784, 1023} {
			q, x := make([]float32, d), make([]float32, d)
			for j := range q {
				q[j], x[j] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			for shift := range 4 {
				xb := toBytes(x, shift)
				for _, k := range []struct {
					name string
					l2   bool
					f    func([]float32, []byte) float32
					g    func([]float32, []float32) float32
				}{
					{"L2Exact", true, L2Exact, L2ExactF}, {"IPExact", false, IPExact, IPExactF},
					{"L2Fast/" + fk.Impl, true, fk.L2, fk.L2F}, {"IPFast/" + fk.Impl, false, fk.IP, fk.IPF},
					{"L2Go4", true, l2Go4, l2Go4F}, {"IPGo4", false, ipGo4, ipGo4F},
				} {
					want := ref(q, x, k.l2)
					got, gotF := k.f(q, xb), k.g(q, x)
					tol := 1e-5 * (math.Abs(want) + float64(d))
					if math.Abs(float64(got)-want) > tol || math.Abs(float64(gotF)-want) > tol {
						t.Errorf("%s d=%d shift=%d: %v / %v, float64 reference %v", k.name, d, shift, got, gotF, want)
					}
				}
			}
		}
	}
}

// TestExactIsSequential pins the exact kernel to strictly sequential
// float32 with each product rounded (the FAISS GENERIC build).
func TestExactIsSequential(t *testing.T) {
	q := []float32{1e8, 1, -1e8, 0.5}
	x := []float32{0, 0, 0, 0}
	var acc float32
	for j := range q {
		tt := q[j] - x[j]
		acc = acc + float32(tt*tt)
	}
	if got := L2Exact(q, toBytes(x, 1)); got != acc {
		t.Fatalf("L2Exact %v, sequential %v", got, acc)
	}
}

func TestHalfToFloat(t *testing.T) {
	for _, c := range []struct {
		h uint16
		f float32
	}{{0x3c00, 1}, {0xc000, -2}, {0x0001, 5.960464477539063e-08}, {0x03ff, 6.097555160522461e-05},
		{0x7bff, 65504}, {0x8000, float32(math.Copysign(0, -1))}, {0x7c00, float32(math.Inf(1))}} {
		if got := HalfToFloat(c.h); math.Float32bits(got) != math.Float32bits(c.f) {
			t.Errorf("HalfToFloat(%#04x) = %v, want %v", c.h, got, c.f)
		}
	}
	if !math.IsNaN(float64(HalfToFloat(0x7e00))) {
		t.Error("NaN half did not convert to NaN")
	}
}

func BenchmarkL2(b *testing.B) {
	for _, d := range []int{128, 784} {
		q, x := make([]float32, d), make([]float32, d)
		for j := range q {
			q[j], x[j] = float32(j), float32(d-j)
		}
		xb := toBytes(x, 1)
		fk := Fast(true)
		for _, k := range []struct {
			name string
			f    func([]float32, []byte) float32
		}{{"exact", L2Exact}, {"go4", l2Go4}, {"fast-" + fk.Impl, fk.L2}} {
			b.Run(k.name+"/d="+itoa(d), func(b *testing.B) {
				var s float32
				for b.Loop() {
					s += k.f(q, xb)
				}
				_ = s
			})
		}
	}
}

func itoa(d int) string {
	return string(rune('0'+d/100%10)) + string(rune('0'+d/10%10)) + string(rune('0'+d%10))
}

// TestMinSlot2: the assembly and Go versions pick FAISS's pop_min slot —
// the highest among the minima of the slots not popped — and a runner-up
// holding the smallest distance of the others, on random pools with ties,
// ±0, +Inf, popped slots and NaN, every length up to 70.
func TestMinSlot2(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, 1, 2, float32(math.Inf(1)), float32(math.NaN())}
	literal := func(dis []float32, ids []int32) (int, bool) {
		best := -1
		var bd float32
		for i := len(dis) - 1; i >= 0; i-- {
			if ids[i] == -1 {
				continue
			}
			if dis[i] != dis[i] {
				return -1, false
			}
			if best < 0 || dis[i] < bd {
				best, bd = i, dis[i]
			}
		}
		return best, true
	}
	for trial := range 20000 {
		n := trial % 71
		dis, ids := make([]float32, n), make([]int32, n)
		for i := range dis {
			dis[i] = vals[r.IntN(len(vals)-1)]
			if trial%7 == 0 && r.IntN(20) == 0 {
				dis[i] = float32(math.NaN())
			}
			if r.IntN(3) == 0 {
				dis[i] = r.Float32()
			}
			ids[i] = int32(i)
			if r.IntN(4) == 0 {
				ids[i] = -1
			}
		}
		ws, wok := literal(dis, ids)
		// The runner-up's distance: the smallest over the other valid slots.
		wr, rd := -1, float32(0)
		if wok && ws >= 0 {
			for i := range dis {
				if ids[i] != -1 && i != ws && (wr < 0 || dis[i] < rd) {
					wr, rd = i, dis[i]
				}
			}
		}
		for name, f := range map[string]func([]float32, []int32) (int, int, bool){"go": minSlot2Go, "fast": MinSlot2} {
			s, ru, ok := f(dis, ids)
			if s != ws || ok != wok {
				t.Fatalf("%s n=%d: (%d, %v), want (%d, %v)\ndis %v\nids %v", name, n, s, ok, ws, wok, dis, ids)
			}
			if !ok {
				continue
			}
			switch {
			case wr < 0 && ru != -1:
				t.Fatalf("%s n=%d: runner-up %d, want none\ndis %v\nids %v", name, n, ru, dis, ids)
			case wr >= 0 && (ru < 0 || ru == s || ids[ru] == -1 || dis[ru] != rd):
				t.Fatalf("%s n=%d: runner-up %d, want a valid slot other than %d holding %v\ndis %v\nids %v", name, n, ru, s, rd, dis, ids)
			}
		}
	}
}

// BenchmarkMinSlot2 times the candidate pool's pop_min scan at the pool
// sizes of ef 16, 64 and 256, half its slots popped.
func BenchmarkMinSlot2(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		dis, ids := make([]float32, n), make([]int32, n)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range dis {
			dis[i], ids[i] = r.Float32(), int32(i)
			if i%2 == 1 {
				ids[i] = -1
			}
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				MinSlot2(dis, ids)
			}
		})
	}
}

// FuzzMinSlot2 compares the assembly with the Go version on arbitrary
// pools: 8 bytes a slot, a float32 distance and an int32 id (−1: popped).
// The slot must be the same; runner-ups may differ only among equal
// distances.
func FuzzMinSlot2(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(1)), 0))
	seed := make([]byte, 0, 8*40)
	for i := range 40 {
		seed = binary.LittleEndian.AppendUint32(seed, math.Float32bits(float32(i%7)))
		id := uint32(i)
		if i%5 == 0 {
			id = math.MaxUint32 // −1
		}
		seed = binary.LittleEndian.AppendUint32(seed, id)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		n := len(b) / 8
		dis, ids := make([]float32, n), make([]int32, n)
		for i := range n {
			dis[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[8*i:]))
			ids[i] = int32(binary.LittleEndian.Uint32(b[8*i+4:]))
		}
		ws, wr, wok := minSlot2Go(dis, ids)
		s, r, ok := MinSlot2(dis, ids)
		if s != ws || ok != wok {
			t.Fatalf("slot (%d, %v), Go (%d, %v)\ndis %v\nids %v", s, ok, ws, wok, dis, ids)
		}
		if ok && (r < 0) != (wr < 0) || r >= 0 && wr >= 0 && dis[r] != dis[wr] {
			t.Fatalf("runner-up %d, Go %d\ndis %v\nids %v", r, wr, dis, ids)
		}
	})
}
