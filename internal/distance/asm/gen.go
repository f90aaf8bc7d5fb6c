// Command asm generates the AVX2+FMA and AVX-512 distance kernels of package distance
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
	kernel512("l2AVX512", "l2AVX512 is l2AVX2 with 64-byte loads (AVX-512 F and DQ), bit-identical to it: two 16-lane accumulators are its four 8-lane ones side by side.", true)
	kernel512("ipAVX512", "ipAVX512 is ipAVX2 with 64-byte loads, bit-identical to it (see l2AVX512).", false)
	prefetch()
	min2Valid()
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

// kernelText starts a kernel's function and loads its arguments.
func kernelText(name, doc string) (q, x, n Register) {
	TEXT(name, NOSPLIT, "func(q, x *byte, n int) float32")
	Doc(doc)
	return Load(Param("q"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
}

func kernel(name, doc string, l2 bool) {
	q, x, n := kernelText(name, doc)
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

	tail(name, l2, q, x, n, acc)
}

// tail finishes a kernel once fewer than 32 floats remain: blocks of 8 into
// acc[0], the reduction of the four accumulators, then one float at a time.
func tail(name string, l2 bool, q, x, n Register, acc []VecVirtual) {
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

// kernel512 writes l2AVX2's or ipAVX2's loop over 32 floats with two ZMM
// accumulators: ZMM a holds what AVX2's accumulators 2a and 2a+1 hold, and
// each lane sees the same operations in the same order, so the sums are
// bit-identical. The rest (blocks of 8, the reduction, the scalar tail) is
// AVX2's own code on the four YMM halves.
//
// A FAISS file puts its vectors at 58 mod 64, and a mapping keeps the
// file's offsets, so loads from x span two cache lines. The split loads
// cost less than reading whole lines and shifting them into place with
// VPERMT2B, in the kernel alone and inside the search.
func kernel512(name, doc string, l2 bool) {
	q, x, n := kernelText(name, doc)
	z := []VecVirtual{ZMM(), ZMM()}
	for _, a := range z {
		VXORPS(a, a, a)
	}
	acc := []VecVirtual{z[0].AsY().(VecVirtual), YMM(), z[1].AsY().(VecVirtual), YMM()}
	CMPQ(n, Imm(32))
	JL(LabelRef(name + "_split"))
	Label(name + "_loop32")
	for i, a := range z {
		step(l2, Mem{Base: q, Disp: 64 * i}, Mem{Base: x, Disp: 64 * i}, ZMM(), a, false)
	}
	ADDQ(Imm(128), q)
	ADDQ(Imm(128), x)
	SUBQ(Imm(32), n)
	CMPQ(n, Imm(32))
	JGE(LabelRef(name + "_loop32"))

	Label(name + "_split")
	VEXTRACTF32X8(Imm(1), z[0], acc[1])
	VEXTRACTF32X8(Imm(1), z[1], acc[3])
	tail(name, l2, q, x, n, acc)
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

// broadcastInf fills a YMM register with +Inf. Every instruction is VEX:
// a non-VEX (legacy SSE) instruction among AVX ones costs an SSE/AVX
// transition penalty.
func broadcastInf() VecVirtual {
	t := GP32()
	MOVL(U32(0x7f800000), t)
	x := XMM()
	VMOVD(t, x)
	y := YMM()
	VBROADCASTSS(x, y)
	return y
}

// min2Valid: the two smallest distances (as a multiset) over slots whose id
// is not −1, 8 slots a step, and whether such a slot holds a NaN. Each lane
// keeps its smallest and second smallest, in two sets of accumulators (even
// and odd blocks) so the dependency chains overlap; then everything folds.
func min2Valid() {
	TEXT("min2Valid8", NOSPLIT, "func(dis *float32, ids *int32, blocks int) (m1, m2 float32, nan bool)")
	Doc("min2Valid8 returns the smallest and second smallest of dis[i] over the 8·blocks slots with ids[i] ≠ −1 (m2 == m1 when the minimum occurs twice; +Inf for what is missing) and whether one of them is NaN (AVX2).")
	dis := Load(Param("dis"), GP64())
	ids := Load(Param("ids"), GP64())
	n := Load(Param("blocks"), GP64())
	ones := YMM()
	VPCMPEQD(ones, ones, ones)
	m1 := broadcastInf()
	m2, m1b, m2b := YMM(), YMM(), YMM()
	VMOVAPS(m1, m2)
	VMOVAPS(m1, m1b)
	VMOVAPS(m1, m2b)
	nans := YMM()
	VXORPS(nans, nans, nans)
	// step folds the block at dis+disp into (m1, m2).
	step := func(disp int, m1, m2 VecVirtual) {
		d, inv, un, t := YMM(), YMM(), YMM(), YMM()
		VMOVUPS(Mem{Base: dis, Disp: disp}, d)
		VPCMPEQD(Mem{Base: ids, Disp: disp}, ones, inv) // popped slots
		VCMPPS(Imm(3), d, d, un)                        // unordered: NaN
		VANDNPS(un, inv, un)                            // NaN in a valid slot
		VORPS(un, nans, nans)
		VORPS(inv, d, d)  // popped slots become NaN, which the steps below skip:
		VMAXPS(d, m1, t)  // t = m1 > d ? m1 : d (NaN d gives NaN)
		VMINPS(m2, t, m2) // m2 = t < m2 ? t : m2 (NaN t keeps m2)
		VMINPS(m1, d, m1) // m1 = d < m1 ? d : m1 (NaN d keeps m1)
	}
	Label("min2_loop2")
	CMPQ(n, Imm(2))
	JL(LabelRef("min2_last"))
	step(0, m1, m2)
	step(32, m1b, m2b)
	ADDQ(Imm(64), dis)
	ADDQ(Imm(64), ids)
	SUBQ(Imm(2), n)
	JMP(LabelRef("min2_loop2"))
	Label("min2_last")
	CMPQ(n, Imm(0))
	JE(LabelRef("min2_reduce"))
	step(0, m1, m2)
	Label("min2_reduce")
	// Fold (a1, a2) with (b1, b2): smallest min(a1, b1), second smallest
	// min(a2, b2, max(a1, b1)). No NaN is left in the accumulators.
	fold := func(a1, a2, b1, b2, u Register) {
		VMAXPS(b1, a1, u)
		VMINPS(b2, a2, a2)
		VMINPS(u, a2, a2)
		VMINPS(b1, a1, a1)
	}
	fold(m1, m2, m1b, m2b, YMM())
	a1, a2 := m1.AsX(), m2.AsX()
	b1, b2, u := XMM(), XMM(), XMM()
	VEXTRACTF128(Imm(1), m1, b1)
	VEXTRACTF128(Imm(1), m2, b2)
	fold(a1, a2, b1, b2, u)
	VMOVHLPS(a1, a1, b1)
	VMOVHLPS(a2, a2, b2)
	fold(a1, a2, b1, b2, u)
	VMOVSHDUP(a1, b1)
	VMOVSHDUP(a2, b2)
	fold(a1, a2, b1, b2, u)
	mask := GP32()
	VMOVMSKPS(nans, mask)
	TESTL(mask, mask)
	nan := GP8()
	SETNE(nan)
	VZEROUPPER()
	Store(a1, ReturnIndex(0))
	Store(a2, ReturnIndex(1))
	Store(nan, ReturnIndex(2))
	RET()
}

// lastEqual: the highest slot with dis == m whose id is not −1.
func lastEqual() {
	TEXT("lastEqual8", NOSPLIT, "func(dis *float32, ids *int32, blocks int, m float32) int")
	Doc("lastEqual8 returns the highest i < 8·blocks with ids[i] ≠ −1 and dis[i] == m, or −1 (AVX2).")
	dis := Load(Param("dis"), GP64())
	ids := Load(Param("ids"), GP64())
	n := Load(Param("blocks"), GP64())
	m, err := Param("m").Resolve()
	if err != nil {
		panic(err)
	}
	my := YMM()
	VBROADCASTSS(m.Addr, my) // VEX from memory: no legacy SSE instruction (see broadcastInf)
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
