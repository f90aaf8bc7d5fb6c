// Command asm generates the AVX2+FMA distance kernels of package distance
// with avo. It lives in its own module so avo stays out of the main go.mod.
//
//	cd internal/distance/asm && go run . -out ../kernels_amd64.s -stubs ../kernels_amd64.go -pkg distance
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("!purego")
	kernel("l2AVX2", "l2AVX2 returns Σ (q[j]−x[j])² over n float32 at q and x (AVX2+FMA, 4×8 lanes).", true)
	kernel("ipAVX2", "ipAVX2 returns Σ q[j]·x[j] over n float32 at q and x (AVX2+FMA, 4×8 lanes).", false)
	prefetch()
	minValid()
	lastEqual()
	Generate()
}

// step accumulates one vector's contribution: acc += (a−b)² or a·b.
func step(l2 bool, a Op, b Mem, t, acc Register, scalar bool) {
	mov, sub, fma := VMOVUPS, VSUBPS, VFMADD231PS
	if scalar {
		mov, sub, fma = VMOVSS, VSUBSS, VFMADD231SS
	}
	mov(a, t)
	if l2 {
		sub(b, t, t)
		fma(t, t, acc)
	} else {
		fma(b, t, acc)
	}
}

func kernel(name, doc string, l2 bool) {
	TEXT(name, NOSPLIT, "func(q, x *byte, n int) float32")
	Doc(doc)
	q := Load(Param("q"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	acc := []VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, a := range acc {
		VXORPS(a, a, a)
	}

	Label(name + "_loop32")
	CMPQ(n, Imm(32))
	JL(LabelRef(name + "_loop8"))
	for i, a := range acc {
		step(l2, Mem{Base: q, Disp: 32 * i}, Mem{Base: x, Disp: 32 * i}, YMM(), a, false)
	}
	ADDQ(Imm(128), q)
	ADDQ(Imm(128), x)
	SUBQ(Imm(32), n)
	JMP(LabelRef(name + "_loop32"))

	Label(name + "_loop8")
	CMPQ(n, Imm(8))
	JL(LabelRef(name + "_reduce"))
	step(l2, Mem{Base: q}, Mem{Base: x}, YMM(), acc[0], false)
	ADDQ(Imm(32), q)
	ADDQ(Imm(32), x)
	SUBQ(Imm(8), n)
	JMP(LabelRef(name + "_loop8"))

	Label(name + "_reduce")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	lo := acc[0].AsX()
	hi := XMM()
	VEXTRACTF128(Imm(1), acc[0], hi)
	VADDPS(hi, lo, lo)
	t := XMM()
	VMOVHLPS(lo, lo, t)
	VADDPS(t, lo, lo)
	VMOVSHDUP(lo, t)
	VADDSS(t, lo, lo)

	Label(name + "_tail")
	CMPQ(n, Imm(0))
	JE(LabelRef(name + "_done"))
	step(l2, Mem{Base: q}, Mem{Base: x}, XMM(), lo, true)
	ADDQ(Imm(4), q)
	ADDQ(Imm(4), x)
	DECQ(n)
	JMP(LabelRef(name + "_tail"))

	Label(name + "_done")
	VZEROUPPER()
	Store(lo, ReturnIndex(0))
	RET()
}

// prefetch issues PREFETCHT0 for every 64-byte line of [p, p+n).
func prefetch() {
	TEXT("prefetchT0", NOSPLIT, "func(p *byte, n int)")
	Doc("prefetchT0 asks the CPU to bring the n bytes at p into the caches (PREFETCHT0 per 64-byte line they touch); it never faults.")
	p := Load(Param("p"), GP64())
	n := Load(Param("n"), GP64())
	// Start at p's cache line and count the bytes before p, so the line
	// holding the last byte is fetched too: 512 bytes at 58 mod 64 span 9
	// lines, and stepping 64 from p itself would touch only 8.
	head := GP64()
	MOVQ(p, head)
	ANDQ(Imm(63), head)
	ADDQ(head, n)
	ANDQ(I32(-64), p)
	Label("prefetch_loop")
	CMPQ(n, Imm(0))
	JLE(LabelRef("prefetch_done"))
	PREFETCHT0(Mem{Base: p})
	ADDQ(Imm(64), p)
	SUBQ(Imm(64), n)
	JMP(LabelRef("prefetch_loop"))
	Label("prefetch_done")
	RET()
}

// broadcastInf fills a YMM register with +Inf.
func broadcastInf() VecVirtual {
	t := GP32()
	MOVL(U32(0x7f800000), t)
	x := XMM()
	MOVD(t, x)
	y := YMM()
	VBROADCASTSS(x, y)
	return y
}

// minValid: the minimum of dis over slots whose id is not −1, 8 slots a
// step, and whether such a slot holds a NaN.
func minValid() {
	TEXT("minValid8", NOSPLIT, "func(dis *float32, ids *int32, blocks int) (m float32, nan bool)")
	Doc("minValid8 returns the minimum of dis[i] over the 8·blocks slots with ids[i] ≠ −1 (+Inf if none) and whether one of them is NaN (AVX2).")
	dis := Load(Param("dis"), GP64())
	ids := Load(Param("ids"), GP64())
	n := Load(Param("blocks"), GP64())
	ones := YMM()
	VPCMPEQD(ones, ones, ones)
	acc := broadcastInf()
	nans := YMM()
	VXORPS(nans, nans, nans)
	Label("minvalid_loop")
	CMPQ(n, Imm(0))
	JE(LabelRef("minvalid_reduce"))
	d, inv, un := YMM(), YMM(), YMM()
	VMOVUPS(Mem{Base: dis}, d)
	VPCMPEQD(Mem{Base: ids}, ones, inv) // popped slots
	VCMPPS(Imm(3), d, d, un)            // unordered: NaN
	VANDNPS(un, inv, un)                // NaN in a valid slot
	VORPS(un, nans, nans)
	VORPS(inv, d, d)    // popped slots become NaN...
	VMINPS(acc, d, acc) // ...which MINPS skips (it returns its second source)
	ADDQ(Imm(32), dis)
	ADDQ(Imm(32), ids)
	DECQ(n)
	JMP(LabelRef("minvalid_loop"))
	Label("minvalid_reduce")
	lo, hi, t := acc.AsX(), XMM(), XMM()
	VEXTRACTF128(Imm(1), acc, hi)
	VMINPS(hi, lo, lo)
	VMOVHLPS(lo, lo, t)
	VMINPS(t, lo, lo)
	VMOVSHDUP(lo, t)
	VMINSS(t, lo, lo)
	mask := GP32()
	VMOVMSKPS(nans, mask)
	TESTL(mask, mask)
	nan := GP8()
	SETNE(nan)
	VZEROUPPER()
	Store(lo, ReturnIndex(0))
	Store(nan, ReturnIndex(1))
	RET()
}

// lastEqual: the highest slot with dis == m whose id is not −1.
func lastEqual() {
	TEXT("lastEqual8", NOSPLIT, "func(dis *float32, ids *int32, blocks int, m float32) int")
	Doc("lastEqual8 returns the highest i < 8·blocks with ids[i] ≠ −1 and dis[i] == m, or −1 (AVX2).")
	dis := Load(Param("dis"), GP64())
	ids := Load(Param("ids"), GP64())
	n := Load(Param("blocks"), GP64())
	mx := Load(Param("m"), XMM())
	my := YMM()
	VBROADCASTSS(mx, my)
	ones := YMM()
	VPCMPEQD(ones, ones, ones)
	off := GP64()
	Label("lasteq_loop")
	CMPQ(n, Imm(0))
	JE(LabelRef("lasteq_none"))
	DECQ(n)
	MOVQ(n, off)
	SHLQ(Imm(5), off)
	d, eq, inv := YMM(), YMM(), YMM()
	VMOVUPS(Mem{Base: dis, Index: off, Scale: 1}, d)
	VCMPPS(Imm(0), d, my, eq) // ordered equal
	VPCMPEQD(Mem{Base: ids, Index: off, Scale: 1}, ones, inv)
	VANDNPS(eq, inv, eq)
	mask := GP32()
	VMOVMSKPS(eq, mask)
	TESTL(mask, mask)
	JZ(LabelRef("lasteq_loop"))
	bit := GP32()
	BSRL(mask, bit)
	SHLQ(Imm(3), n)
	ADDQ(bit.As64(), n)
	VZEROUPPER()
	Store(n, ReturnIndex(0))
	RET()
	Label("lasteq_none")
	VZEROUPPER()
	none := GP64()
	MOVQ(I64(-1), none)
	Store(none, ReturnIndex(0))
	RET()
}
