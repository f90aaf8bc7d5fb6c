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
	Doc("prefetchT0 asks the CPU to bring the n bytes at p into the caches (PREFETCHT0 per 64-byte line); it never faults.")
	p := Load(Param("p"), GP64())
	n := Load(Param("n"), GP64())
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
