package httpapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// Vector is a JSON array of numbers. Decoding one through encoding/json's
// reflection costs about as much as the rest of a small search, so a plain
// array of numbers is parsed directly; anything else falls back to
// encoding/json, whose error then names the problem.
type Vector []float64

// MaxVectorLen bounds a vector's values before any is parsed (FAISS and
// OpenSearch indexes have far fewer dimensions), so a body of commas cannot
// make the parser allocate by its size.
const MaxVectorLen = 1 << 16

// UnmarshalJSON implements json.Unmarshaler.
func (v *Vector) UnmarshalJSON(b []byte) error {
	dst := (*v)[:0]
	n := bytes.Count(b, []byte{','}) + 1
	if n > MaxVectorLen {
		return fmt.Errorf("vector: more than %d values", MaxVectorLen)
	}
	if cap(dst) < n {
		dst = make([]float64, 0, n) // once, not regrown per append
	}
	if out, ok := parseNumbers(b, dst); ok {
		*v = out
		return nil
	}
	out, err := decodeNonNull[float64](b, "vector", "value")
	if err != nil {
		return err
	}
	*v = out
	return nil
}

// decodeNonNull decodes the JSON array (or null) field name, whose
// elements may not be null: encoding/json would read a null element as the
// zero value. elem names one in the error ("vector: value 3 is null").
func decodeNonNull[T any](b []byte, name, elem string) ([]T, error) {
	var ptrs []*T
	if err := json.Unmarshal(b, &ptrs); err != nil {
		return nil, listErrorText[T](err, name, elem)
	}
	if ptrs == nil {
		return nil, nil
	}
	out := make([]T, len(ptrs))
	for i, p := range ptrs {
		if p == nil {
			return nil, fmt.Errorf("%s: %s %d is null", name, elem, i)
		}
		out[i] = *p
	}
	return out, nil
}

// parseNumbers parses "[n, n, …]" (or null) into dst, numbers in JSON's
// grammar; ok is false for anything else, which the caller hands to
// encoding/json.
func parseNumbers(b []byte, dst []float64) ([]float64, bool) {
	p := cursor{b: b}
	p.space()
	if bytes.HasPrefix(b[p.i:], []byte("null")) {
		p.i += 4
		p.space()
		return nil, p.i == len(b)
	}
	if !p.consume('[') {
		return nil, false
	}
	if p.consume(']') {
		p.space()
		return dst, p.i == len(b)
	}
	for {
		p.space()
		f, end, exact, ok := decimal(p.b, p.i)
		if !ok {
			return nil, false
		}
		if !exact {
			var err error
			if f, err = strconv.ParseFloat(string(p.b[p.i:end]), 64); err != nil {
				return nil, false
			}
		}
		p.i = end
		dst = append(dst, f)
		if p.consume(',') {
			continue
		}
		if p.consume(']') {
			p.space()
			return dst, p.i == len(b)
		}
		return nil, false
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// decimal scans the JSON number at b[i:] in one pass (JSON's grammar) and
// converts its text m·10^e (at most 19 significant digits) to the float64
// strconv.ParseFloat returns, the correctly rounded one, in two exact ways:
//
//   - m < 2^53 and |e| ≤ 22: m and 10^e are exact in float64, so m·10^e or
//     m/10^−e is one correctly rounded operation (Clinger's fast path);
//   - otherwise, for |e| ≤ 19 (10^|e| fits 64 bits): the product m·10^e
//     exactly in 128 bits, or the quotient m·2^s/10^−e to 64 bits with its
//     remainder, rounded to 53 bits half-to-even (roundTop).
//
// That covers what programs write: %g of a float32 (9 digits) and the
// float64 repr of one (17 digits, what Python's json sends), faster than
// strconv's general scanner, a visible share of a search's CPU. ok is
// false when no number in JSON's grammar starts at b[i]; end is where it
// stops; exact is false when the value needs strconv (more than 19
// significant digits, or an exponent out of range).
func decimal(b []byte, i int) (f float64, end int, exact, ok bool) {
	neg := false
	if i < len(b) && b[i] == '-' {
		i, neg = i+1, true
	}
	var m uint64
	nd, exp := 0, 0 // significant digits taken; decimal exponent
	over := false   // more than 19 significant digits
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if nd == 19 {
				over = true
				continue
			}
			m, nd = m*10+uint64(b[i]-'0'), nd+1
		}
	default:
		return 0, i, false, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			// Eight digits in one step while they all fit in the 19 kept
			// (past any leading zeros): most of a 17-digit repr.
			if m != 0 && nd <= 11 && i+8 <= len(b) {
				if v := binary.LittleEndian.Uint64(b[i:]); eightDigits(v) {
					m, nd, exp = m*1e8+eightValue(v), nd+8, exp-8
					i += 7 // and the loop's own step
					continue
				}
			}
			switch {
			case m == 0 && b[i] == '0':
				exp--
			case nd == 19:
				over = true
			default:
				m, nd, exp = m*10+uint64(b[i]-'0'), nd+1, exp-1
			}
		}
		if i == start {
			return 0, i, false, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		start, e := i, 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if e <= 1000 {
				e = e*10 + int(b[i]-'0')
			}
		}
		if i == start {
			return 0, i, false, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if over {
		return 0, i, false, true
	}
	end = i
	switch {
	case m == 0:
	case m < 1<<53 && exp >= 0 && exp <= 22:
		f = float64(m) * pow10[exp]
	case m < 1<<53 && exp < 0 && exp >= -22:
		f = float64(m) / pow10[-exp]
	case exp >= 0 && exp <= 19:
		hi, lo := bits.Mul64(m, ipow10[exp])
		f = round128(hi, lo)
	case exp < 0 && exp >= -19:
		f = quotient(m, ipow10[-exp])
	default:
		return 0, end, false, true
	}
	if neg {
		f = -f
	}
	return f, end, true, true
}

// eightDigits reports whether the 8 bytes of v (little-endian) are all
// ASCII digits: no byte is below '0' (v − '0' borrows into a top bit) or
// above '9' (v + 0x46 carries into one), and none has its own top bit.
func eightDigits(v uint64) bool {
	return ((v-0x3030303030303030)|(v+0x4646464646464646)|v)&0x8080808080808080 == 0
}

// eightValue is the number the 8 ASCII digits in v (little-endian, the
// first digit in the low byte) spell: pairs, then quads, then the eight,
// each step one multiply-add in parallel lanes.
func eightValue(v uint64) uint64 {
	v -= 0x3030303030303030
	v = v*10 + v>>8                                                                         // 2-digit values in bytes 0, 2, 4, 6
	v = (v&0x000000FF000000FF)*(100+1000000<<32) + (v>>16&0x000000FF000000FF)*(1+10000<<32) // 4-digit halves summed in the top word
	return v >> 32
}

// ipow10[k] is 10^k as an integer.
var ipow10 = func() (p [20]uint64) {
	p[0] = 1
	for k := 1; k < len(p); k++ {
		p[k] = p[k-1] * 10
	}
	return
}()

// round128 is the float64 nearest hi·2^64 + lo (> 0), ties to even.
func round128(hi, lo uint64) float64 {
	if hi == 0 {
		n := bits.LeadingZeros64(lo)
		return roundTop(lo<<n, false, -n)
	}
	n := bits.LeadingZeros64(hi)
	x := hi << n
	if n > 0 {
		x |= lo >> (64 - n)
	}
	return roundTop(x, lo<<n != 0, 64-n)
}

// quotient is the float64 nearest m/d (m, d > 0), ties to even: the
// quotient is taken to 64 significant bits, its remainder kept as a sticky
// bit. m·2^s < 2^64·d always holds, so bits.Div64 cannot overflow.
func quotient(m, d uint64) float64 {
	s := 63 - bits.Len64(m) + bits.Len64(d) // q = m·2^s/d lies in (2^62, 2^64)
	q, r := div128(m, s, d)
	if q < 1<<63 { // one more bit, still below 2^64
		s++
		q, r = div128(m, s, d)
	}
	return roundTop(q, r != 0, -s)
}

// div128 divides m·2^s (s in [0, 127]) by d.
func div128(m uint64, s int, d uint64) (q, r uint64) {
	var hi, lo uint64
	switch {
	case s >= 64:
		hi = m << (s - 64)
	case s > 0:
		hi, lo = m>>(64-s), m<<s
	default:
		lo = m
	}
	return bits.Div64(hi, lo, d)
}

// roundTop is the float64 nearest (x + δ)·2^e, where x has its top bit set
// and δ ∈ [0, 1) is non-zero exactly when sticky: the top 53 bits of x,
// rounded half to even on the 11 below and δ.
func roundTop(x uint64, sticky bool, e int) float64 {
	mant, rest := x>>11, x&(1<<11-1)
	const half = 1 << 10
	if rest > half || (rest == half && (sticky || mant&1 == 1)) {
		mant++ // at most 2^53: still exact in float64
	}
	return math.Ldexp(float64(mant), e+11)
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}
