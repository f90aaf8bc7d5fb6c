package distance

import (
	"encoding/binary"
	"math"
)

// SQ decodes ScalarQuantizer codes per docs/faiss-format.md §3, in float32 with
// one rounding per operation: float(c)+0.5 (exact), divide (round), multiply
// by vdiff (round), add vmin (round); never fused.
type SQ struct {
	QType   int // faissfmt.QType value (0–8)
	D       int
	Trained []float32 // vmin then vdiff (per component, or 2 shared values)
}

// The qtype values (faissfmt.QType).
const (
	QT8bit             = 0
	QT4bit             = 1
	QT8bitUniform      = 2
	QT4bitUniform      = 3
	QTFP16             = 4
	QT8bitDirect       = 5
	QT6bit             = 6
	QTBF16             = 7
	QT8bitDirectSigned = 8
)

// Decode writes the D components of code into dst.
func (s *SQ) Decode(dst []float32, code []byte) {
	d := s.D
	dst = dst[:d]
	switch s.QType {
	case QT8bit:
		vmin, vdiff := s.Trained[:d], s.Trained[d:2*d]
		code = code[:d]
		for j := range dst {
			t := (float32(code[j]) + 0.5) / 255
			dst[j] = vmin[j] + float32(t*vdiff[j])
		}
	case QT4bit:
		vmin, vdiff := s.Trained[:d], s.Trained[d:2*d]
		for j := range dst {
			t := (float32(nibble(code, j)) + 0.5) / 15
			dst[j] = vmin[j] + float32(t*vdiff[j])
		}
	case QT8bitUniform:
		vmin, vdiff := s.Trained[0], s.Trained[1]
		code = code[:d]
		for j := range dst {
			t := (float32(code[j]) + 0.5) / 255
			dst[j] = vmin + float32(t*vdiff)
		}
	case QT4bitUniform:
		vmin, vdiff := s.Trained[0], s.Trained[1]
		for j := range dst {
			t := (float32(nibble(code, j)) + 0.5) / 15
			dst[j] = vmin + float32(t*vdiff)
		}
	case QTFP16:
		code = code[:2*d]
		for j := range dst {
			dst[j] = HalfToFloat(binary.LittleEndian.Uint16(code[2*j:]))
		}
	case QT8bitDirect:
		code = code[:d]
		for j := range dst {
			dst[j] = float32(code[j])
		}
	case QT6bit:
		vmin, vdiff := s.Trained[:d], s.Trained[d:2*d]
		for j := range dst {
			g := code[3*(j/4):]
			v := uint32(g[0]) | uint32(g[1])<<8 | uint32(g[2])<<16
			c := (v >> (6 * uint(j%4))) & 63
			t := (float32(c) + 0.5) / 63
			dst[j] = vmin[j] + float32(t*vdiff[j])
		}
	case QTBF16:
		code = code[:2*d]
		for j := range dst {
			dst[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(code[2*j:])) << 16)
		}
	case QT8bitDirectSigned:
		code = code[:d]
		for j := range dst {
			dst[j] = float32(int(code[j]) - 128)
		}
	}
}

func nibble(code []byte, j int) byte {
	b := code[j/2]
	if j%2 == 0 {
		return b & 15
	}
	return b >> 4
}

// IntegerDirect reports whether FAISS computes this quantizer's distances in
// the integer domain: QT_8bit_direct with d % 16 == 0 (docs/hnsw-search.md §2).
func (s *SQ) IntegerDirect() bool { return s.QType == QT8bitDirect && s.D%16 == 0 }

// QueryBytes converts a query for the integer 8bit_direct path: each
// component truncated to an int and kept mod 256, as FAISS does.
func QueryBytes(dst []byte, q []float32) {
	for j, v := range q {
		dst[j] = uint8(int32(v))
	}
}

// L2Bytes and IPBytes are the integer-domain distances of the 8bit_direct
// path, converted to float32 at the end.
func L2Bytes(q, c []byte) float32 {
	c = c[:len(q)]
	var acc int32
	for j, v := range q {
		t := int32(v) - int32(c[j])
		acc += t * t
	}
	return float32(acc)
}

func IPBytes(q, c []byte) float32 {
	c = c[:len(q)]
	var acc int32
	for j, v := range q {
		acc += int32(v) * int32(c[j])
	}
	return float32(acc)
}

// HalfToFloat converts IEEE binary16 to float32 exactly (subnormals, ±inf
// and NaN included).
func HalfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: value = man · 2^-24, exact in float32
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}
