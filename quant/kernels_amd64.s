//go:build !purego

#include "textflag.h"

// Hand-written AVX2+FMA and POPCNT kernels; the Go versions in kernels.go
// are the reference (TestKernelsMatchGo). Lengths are whole blocks: the
// Go wrappers in kernels_amd64.go do the tails.

// func l2U8AVX2(a *float32, b *float32, c *byte, n int) float32
// Σ (a[j] − b[j]·c[j])² over n (a multiple of 8) dimensions, 4×8 lanes.
TEXT ·l2U8AVX2(SB), NOSPLIT, $0-36
	MOVQ   a+0(FP), AX
	MOVQ   b+8(FP), BX
	MOVQ   c+16(FP), CX
	MOVQ   n+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

l2_loop32:
	CMPQ         DX, $32
	JL           l2_loop8
	VPMOVZXBD    (CX), Y4
	VCVTDQ2PS    Y4, Y4
	VMOVUPS      (AX), Y5
	VFNMADD231PS (BX), Y4, Y5
	VFMADD231PS  Y5, Y5, Y0
	VPMOVZXBD    8(CX), Y6
	VCVTDQ2PS    Y6, Y6
	VMOVUPS      32(AX), Y7
	VFNMADD231PS 32(BX), Y6, Y7
	VFMADD231PS  Y7, Y7, Y1
	VPMOVZXBD    16(CX), Y8
	VCVTDQ2PS    Y8, Y8
	VMOVUPS      64(AX), Y9
	VFNMADD231PS 64(BX), Y8, Y9
	VFMADD231PS  Y9, Y9, Y2
	VPMOVZXBD    24(CX), Y10
	VCVTDQ2PS    Y10, Y10
	VMOVUPS      96(AX), Y11
	VFNMADD231PS 96(BX), Y10, Y11
	VFMADD231PS  Y11, Y11, Y3
	ADDQ         $32, CX
	ADDQ         $128, AX
	ADDQ         $128, BX
	SUBQ         $32, DX
	JMP          l2_loop32

l2_loop8:
	CMPQ         DX, $8
	JL           l2_done
	VPMOVZXBD    (CX), Y4
	VCVTDQ2PS    Y4, Y4
	VMOVUPS      (AX), Y5
	VFNMADD231PS (BX), Y4, Y5
	VFMADD231PS  Y5, Y5, Y0
	ADDQ         $8, CX
	ADDQ         $32, AX
	ADDQ         $32, BX
	SUBQ         $8, DX
	JMP          l2_loop8

l2_done:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+32(FP)
	RET

// func dotU8AVX2(w *float32, c *byte, n int) float32
// Σ w[j]·c[j] over n (a multiple of 8) dimensions, 4×8 lanes.
TEXT ·dotU8AVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), AX
	MOVQ   c+8(FP), CX
	MOVQ   n+16(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot_loop32:
	CMPQ        DX, $32
	JL          dot_loop8
	VPMOVZXBD   (CX), Y4
	VCVTDQ2PS   Y4, Y4
	VFMADD231PS (AX), Y4, Y0
	VPMOVZXBD   8(CX), Y5
	VCVTDQ2PS   Y5, Y5
	VFMADD231PS 32(AX), Y5, Y1
	VPMOVZXBD   16(CX), Y6
	VCVTDQ2PS   Y6, Y6
	VFMADD231PS 64(AX), Y6, Y2
	VPMOVZXBD   24(CX), Y7
	VCVTDQ2PS   Y7, Y7
	VFMADD231PS 96(AX), Y7, Y3
	ADDQ        $32, CX
	ADDQ        $128, AX
	SUBQ        $32, DX
	JMP         dot_loop32

dot_loop8:
	CMPQ        DX, $8
	JL          dot_done
	VPMOVZXBD   (CX), Y4
	VCVTDQ2PS   Y4, Y4
	VFMADD231PS (AX), Y4, Y0
	ADDQ        $8, CX
	ADDQ        $32, AX
	SUBQ        $8, DX
	JMP         dot_loop8

dot_done:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func pop8POPCNT(planes *uint64, x *byte, words int) uint64
// Σₖ 2ᵏ·Σ_w popcount(x[w] & planes[8w+k]), k = 0…7.
TEXT ·pop8POPCNT(SB), NOSPLIT, $0-32
	MOVQ planes+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ words+16(FP), CX
	XORQ R8, R8
	XORQ R9, R9
	XORQ R10, R10
	XORQ R11, R11

pop8_loop:
	TESTQ   CX, CX
	JZ      pop8_done
	MOVQ    (DI), AX
	MOVQ    (SI), BX
	ANDQ    AX, BX
	POPCNTQ BX, BX
	ADDQ    BX, R8
	MOVQ    8(SI), DX
	ANDQ    AX, DX
	POPCNTQ DX, DX
	ADDQ    DX, R9
	MOVQ    16(SI), R12
	ANDQ    AX, R12
	POPCNTQ R12, R12
	ADDQ    R12, R10
	MOVQ    24(SI), R13
	ANDQ    AX, R13
	POPCNTQ R13, R13
	ADDQ    R13, R11
	MOVQ    32(SI), BX
	ANDQ    AX, BX
	POPCNTQ BX, BX
	SHLQ    $4, BX
	ADDQ    BX, R8
	MOVQ    40(SI), DX
	ANDQ    AX, DX
	POPCNTQ DX, DX
	SHLQ    $4, DX
	ADDQ    DX, R9
	MOVQ    48(SI), R12
	ANDQ    AX, R12
	POPCNTQ R12, R12
	SHLQ    $4, R12
	ADDQ    R12, R10
	MOVQ    56(SI), R13
	ANDQ    AX, R13
	POPCNTQ R13, R13
	SHLQ    $4, R13
	ADDQ    R13, R11
	ADDQ    $8, DI
	ADDQ    $64, SI
	DECQ    CX
	JMP     pop8_loop

pop8_done:
	SHLQ $1, R9
	SHLQ $2, R10
	SHLQ $3, R11
	ADDQ R9, R8
	ADDQ R10, R8
	ADDQ R11, R8
	MOVQ R8, ret+24(FP)
	RET

// func pop8AVX512(planes *uint64, x *byte, words int) uint64
// pop8POPCNT with the 8 planes of a word in one 512-bit register: lane k
// accumulates plane k's popcounts (VPOPCNTQ), shifted left by k at the end.
TEXT ·pop8AVX512(SB), NOSPLIT, $0-32
	MOVQ   planes+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   words+16(FP), CX
	VPXORQ Z0, Z0, Z0

pop8z_loop:
	TESTQ        CX, CX
	JZ           pop8z_done
	VPBROADCASTQ (DI), Z1
	VPANDQ       (SI), Z1, Z1
	VPOPCNTQ     Z1, Z1
	VPADDQ       Z1, Z0, Z0
	ADDQ         $8, DI
	ADDQ         $64, SI
	DECQ         CX
	JMP          pop8z_loop

pop8z_done:
	VPSLLVQ       pop8Shifts<>(SB), Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDQ        Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPADDQ        X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPADDQ        X1, X0, X0
	VMOVQ         X0, AX
	VZEROUPPER
	MOVQ          AX, ret+24(FP)
	RET

// Lane k of pop8AVX512's sums is plane k: weight 2ᵏ.
DATA pop8Shifts<>+0(SB)/8, $0
DATA pop8Shifts<>+8(SB)/8, $1
DATA pop8Shifts<>+16(SB)/8, $2
DATA pop8Shifts<>+24(SB)/8, $3
DATA pop8Shifts<>+32(SB)/8, $4
DATA pop8Shifts<>+40(SB)/8, $5
DATA pop8Shifts<>+48(SB)/8, $6
DATA pop8Shifts<>+56(SB)/8, $7
GLOBL pop8Shifts<>(SB), RODATA|NOPTR, $64

// Lane k of a 4-bit block holds dimension k of 8: shift the block's 32
// bits right by 4k (the low nibble of each byte comes first).
DATA nibbleShifts<>+0(SB)/4, $0
DATA nibbleShifts<>+4(SB)/4, $4
DATA nibbleShifts<>+8(SB)/4, $8
DATA nibbleShifts<>+12(SB)/4, $12
DATA nibbleShifts<>+16(SB)/4, $16
DATA nibbleShifts<>+20(SB)/4, $20
DATA nibbleShifts<>+24(SB)/4, $24
DATA nibbleShifts<>+28(SB)/4, $28
GLOBL nibbleShifts<>(SB), RODATA|NOPTR, $32

// func l2U4AVX2(a *float32, b *float32, c *byte, n int) float32
// l2U8AVX2 on 4-bit codes: each 8 dimensions are 4 bytes, broadcast to
// the 8 lanes, shifted by 4·lane and masked to their nibble, then the
// same arithmetic (4×8 lanes).
TEXT ·l2U4AVX2(SB), NOSPLIT, $0-36
	MOVQ    a+0(FP), AX
	MOVQ    b+8(FP), BX
	MOVQ    c+16(FP), CX
	MOVQ    n+24(FP), DX
	VMOVDQU nibbleShifts<>(SB), Y14
	VPCMPEQD Y15, Y15, Y15
	VPSRLD  $28, Y15, Y15 // 0x0000000f in every lane
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3

l2u4_loop32:
	CMPQ         DX, $32
	JL           l2u4_loop8
	VPBROADCASTD (CX), Y4
	VPSRLVD      Y14, Y4, Y4
	VPAND        Y15, Y4, Y4
	VCVTDQ2PS    Y4, Y4
	VMOVUPS      (AX), Y5
	VFNMADD231PS (BX), Y4, Y5
	VFMADD231PS  Y5, Y5, Y0
	VPBROADCASTD 4(CX), Y6
	VPSRLVD      Y14, Y6, Y6
	VPAND        Y15, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMOVUPS      32(AX), Y7
	VFNMADD231PS 32(BX), Y6, Y7
	VFMADD231PS  Y7, Y7, Y1
	VPBROADCASTD 8(CX), Y8
	VPSRLVD      Y14, Y8, Y8
	VPAND        Y15, Y8, Y8
	VCVTDQ2PS    Y8, Y8
	VMOVUPS      64(AX), Y9
	VFNMADD231PS 64(BX), Y8, Y9
	VFMADD231PS  Y9, Y9, Y2
	VPBROADCASTD 12(CX), Y10
	VPSRLVD      Y14, Y10, Y10
	VPAND        Y15, Y10, Y10
	VCVTDQ2PS    Y10, Y10
	VMOVUPS      96(AX), Y11
	VFNMADD231PS 96(BX), Y10, Y11
	VFMADD231PS  Y11, Y11, Y3
	ADDQ         $16, CX
	ADDQ         $128, AX
	ADDQ         $128, BX
	SUBQ         $32, DX
	JMP          l2u4_loop32

l2u4_loop8:
	CMPQ         DX, $8
	JL           l2u4_done
	VPBROADCASTD (CX), Y4
	VPSRLVD      Y14, Y4, Y4
	VPAND        Y15, Y4, Y4
	VCVTDQ2PS    Y4, Y4
	VMOVUPS      (AX), Y5
	VFNMADD231PS (BX), Y4, Y5
	VFMADD231PS  Y5, Y5, Y0
	ADDQ         $4, CX
	ADDQ         $32, AX
	ADDQ         $32, BX
	SUBQ         $8, DX
	JMP          l2u4_loop8

l2u4_done:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+32(FP)
	RET

// func dotU4AVX2(w *float32, c *byte, n int) float32
// dotU8AVX2 on 4-bit codes, unpacked as l2U4AVX2 does.
TEXT ·dotU4AVX2(SB), NOSPLIT, $0-28
	MOVQ     w+0(FP), AX
	MOVQ     c+8(FP), CX
	MOVQ     n+16(FP), DX
	VMOVDQU  nibbleShifts<>(SB), Y14
	VPCMPEQD Y15, Y15, Y15
	VPSRLD   $28, Y15, Y15
	VXORPS   Y0, Y0, Y0
	VXORPS   Y1, Y1, Y1
	VXORPS   Y2, Y2, Y2
	VXORPS   Y3, Y3, Y3

dotu4_loop32:
	CMPQ         DX, $32
	JL           dotu4_loop8
	VPBROADCASTD (CX), Y4
	VPSRLVD      Y14, Y4, Y4
	VPAND        Y15, Y4, Y4
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  (AX), Y4, Y0
	VPBROADCASTD 4(CX), Y5
	VPSRLVD      Y14, Y5, Y5
	VPAND        Y15, Y5, Y5
	VCVTDQ2PS    Y5, Y5
	VFMADD231PS  32(AX), Y5, Y1
	VPBROADCASTD 8(CX), Y6
	VPSRLVD      Y14, Y6, Y6
	VPAND        Y15, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VFMADD231PS  64(AX), Y6, Y2
	VPBROADCASTD 12(CX), Y7
	VPSRLVD      Y14, Y7, Y7
	VPAND        Y15, Y7, Y7
	VCVTDQ2PS    Y7, Y7
	VFMADD231PS  96(AX), Y7, Y3
	ADDQ         $16, CX
	ADDQ         $128, AX
	SUBQ         $32, DX
	JMP          dotu4_loop32

dotu4_loop8:
	CMPQ         DX, $8
	JL           dotu4_done
	VPBROADCASTD (CX), Y4
	VPSRLVD      Y14, Y4, Y4
	VPAND        Y15, Y4, Y4
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  (AX), Y4, Y0
	ADDQ         $4, CX
	ADDQ         $32, AX
	SUBQ         $8, DX
	JMP          dotu4_loop8

dotu4_done:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// Lane k of a bit-plane byte broadcast to 8 lanes holds bit k.
DATA bitSelect<>+0(SB)/4, $1
DATA bitSelect<>+4(SB)/4, $2
DATA bitSelect<>+8(SB)/4, $4
DATA bitSelect<>+12(SB)/4, $8
DATA bitSelect<>+16(SB)/4, $16
DATA bitSelect<>+20(SB)/4, $32
DATA bitSelect<>+24(SB)/4, $64
DATA bitSelect<>+28(SB)/4, $128
GLOBL bitSelect<>(SB), RODATA|NOPTR, $32

// func dotPlanesAVX2(w *float32, nib *byte, plane *byte, pb int, planes int, n int) float32
// Σ w[j]·code_j over n (a multiple of 8) dimensions of a 5x or 6x row:
// each 8 dimensions' nibbles are unpacked as dotU4AVX2 does and shifted
// left by planes; then plane 0's byte (and plane 1's, pb bytes further,
// when planes is 2) is broadcast, its bit k selected into lane k, and
// or-ed in at bit p; the codes, converted, are multiplied into 2×8 lanes
// (two blocks a step, so two chains of dependent FMAs).
TEXT ·dotPlanesAVX2(SB), NOSPLIT, $0-52
	MOVQ     w+0(FP), AX
	MOVQ     nib+8(FP), CX
	MOVQ     plane+16(FP), BX
	MOVQ     pb+24(FP), SI
	MOVQ     planes+32(FP), DI
	MOVQ     n+40(FP), DX
	VMOVDQU  nibbleShifts<>(SB), Y14
	VMOVDQU  bitSelect<>(SB), Y13
	VPCMPEQD Y15, Y15, Y15
	VPSRLD   $28, Y15, Y15 // 0x0000000f in every lane
	MOVQ     DI, X12       // the nibbles' shift
	VXORPS   Y0, Y0, Y0
	VXORPS   Y1, Y1, Y1

dotp_loop16:
	CMPQ         DX, $16
	JL           dotp_loop8
	VPBROADCASTD (CX), Y4
	VPSRLVD      Y14, Y4, Y4
	VPAND        Y15, Y4, Y4
	VPSLLD       X12, Y4, Y4
	VPBROADCASTD 4(CX), Y8
	VPSRLVD      Y14, Y8, Y8
	VPAND        Y15, Y8, Y8
	VPSLLD       X12, Y8, Y8
	VPBROADCASTB (BX), Y5
	VPAND        Y13, Y5, Y5
	VPCMPEQD     Y13, Y5, Y5 // all ones where the bit is set
	VPSRLD       $31, Y5, Y5
	VPOR         Y5, Y4, Y4
	VPBROADCASTB 1(BX), Y9
	VPAND        Y13, Y9, Y9
	VPCMPEQD     Y13, Y9, Y9
	VPSRLD       $31, Y9, Y9
	VPOR         Y9, Y8, Y8
	CMPQ         DI, $2
	JL           dotp_sum16
	VPBROADCASTB (BX)(SI*1), Y6
	VPAND        Y13, Y6, Y6
	VPCMPEQD     Y13, Y6, Y6
	VPSRLD       $31, Y6, Y6
	VPSLLD       $1, Y6, Y6
	VPOR         Y6, Y4, Y4
	VPBROADCASTB 1(BX)(SI*1), Y10
	VPAND        Y13, Y10, Y10
	VPCMPEQD     Y13, Y10, Y10
	VPSRLD       $31, Y10, Y10
	VPSLLD       $1, Y10, Y10
	VPOR         Y10, Y8, Y8

dotp_sum16:
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  (AX), Y4, Y0
	VCVTDQ2PS    Y8, Y8
	VFMADD231PS  32(AX), Y8, Y1
	ADDQ         $8, CX
	ADDQ         $2, BX
	ADDQ         $64, AX
	SUBQ         $16, DX
	JMP          dotp_loop16

dotp_loop8:
	CMPQ         DX, $8
	JL           dotp_done
	VPBROADCASTD (CX), Y4
	VPSRLVD      Y14, Y4, Y4
	VPAND        Y15, Y4, Y4
	VPSLLD       X12, Y4, Y4
	VPBROADCASTB (BX), Y5
	VPAND        Y13, Y5, Y5
	VPCMPEQD     Y13, Y5, Y5
	VPSRLD       $31, Y5, Y5
	VPOR         Y5, Y4, Y4
	CMPQ         DI, $2
	JL           dotp_sum
	VPBROADCASTB (BX)(SI*1), Y6
	VPAND        Y13, Y6, Y6
	VPCMPEQD     Y13, Y6, Y6
	VPSRLD       $31, Y6, Y6
	VPSLLD       $1, Y6, Y6
	VPOR         Y6, Y4, Y4

dotp_sum:
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  (AX), Y4, Y0
	ADDQ         $4, CX
	ADDQ         $1, BX
	ADDQ         $32, AX
	SUBQ         $8, DX
	JMP          dotp_loop8

dotp_done:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+48(FP)
	RET

// func decodeU8AVX2(dst, vmin, delta *float32, c *byte, n int)
// n a multiple of 8. dst[j] = vmin[j] + delta[j]·c[j], the product
// rounded before the sum (VMULPS then VADDPS, not an FMA), as decodeU8Go.
TEXT ·decodeU8AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ vmin+8(FP), AX
	MOVQ delta+16(FP), BX
	MOVQ c+24(FP), CX
	MOVQ n+32(FP), DX

dec_loop16:
	CMPQ      DX, $16
	JL        dec_loop8
	VPMOVZXBD (CX), Y0
	VPMOVZXBD 8(CX), Y1
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VMULPS    (BX), Y0, Y0
	VMULPS    32(BX), Y1, Y1
	VADDPS    (AX), Y0, Y0
	VADDPS    32(AX), Y1, Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $16, CX
	ADDQ      $64, AX
	ADDQ      $64, BX
	ADDQ      $64, DI
	SUBQ      $16, DX
	JMP       dec_loop16

dec_loop8:
	CMPQ      DX, $8
	JL        dec_done
	VPMOVZXBD (CX), Y0
	VCVTDQ2PS Y0, Y0
	VMULPS    (BX), Y0, Y0
	VADDPS    (AX), Y0, Y0
	VMOVUPS   Y0, (DI)

dec_done:
	VZEROUPPER
	RET
