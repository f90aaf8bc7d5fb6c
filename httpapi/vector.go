package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
)

// Vector is a JSON array of numbers. Decoding one through encoding/json's
// reflection took half the CPU of a search request (64 floats), so a plain
// array of numbers is parsed directly; anything else falls back to
// encoding/json, whose error then names the problem.
type Vector []float64

// UnmarshalJSON implements json.Unmarshaler.
func (v *Vector) UnmarshalJSON(b []byte) error {
	dst := (*v)[:0]
	if n := bytes.Count(b, []byte{','}) + 1; cap(dst) < n {
		dst = takeFloats(n) // once, not regrown per append
	}
	if out, ok := parseNumbers(b, dst); ok {
		*v = out
		return nil
	}
	var f []float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("vector: %w", err)
	}
	*v = f
	return nil
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
		t, ok := p.number()
		if !ok {
			return nil, false
		}
		f, ok := exactDecimal(t)
		if !ok {
			var err error
			if f, err = strconv.ParseFloat(string(t), 64); err != nil {
				return nil, false
			}
		}
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

// finite32 reports whether v is a finite float32 value.
func finite32(v float64) bool { return !math.IsNaN(v) && math.Abs(v) <= math.MaxFloat32 }

// exactDecimal converts a JSON number's text when the result is exact in
// two float64 operations: at most 19 significant digits forming an integer
// m < 2^53 and a power of ten 10^e with |e| ≤ 22 (both exact in float64),
// so m·10^e or m/10^−e is one correctly rounded operation: the value
// strconv.ParseFloat returns (Clinger's fast path). Vectors written by
// programs (%g of a float32: 9 digits) nearly always qualify; ok is false
// otherwise and the caller uses strconv. It skips strconv's general
// scanner, a sixth of a 128-d search request's CPU.
func exactDecimal(t []byte) (float64, bool) {
	i, neg := 0, false
	if len(t) > 0 && t[0] == '-' {
		i, neg = 1, true
	}
	var m uint64
	nd, exp := 0, 0 // significant digits taken; decimal exponent
	for ; i < len(t) && t[i] >= '0' && t[i] <= '9'; i++ {
		if m == 0 && t[i] == '0' {
			continue
		}
		if nd == 19 {
			return 0, false
		}
		m, nd = m*10+uint64(t[i]-'0'), nd+1
	}
	if i < len(t) && t[i] == '.' {
		for i++; i < len(t) && t[i] >= '0' && t[i] <= '9'; i++ {
			if m == 0 && t[i] == '0' {
				exp--
				continue
			}
			if nd == 19 {
				return 0, false
			}
			m, nd, exp = m*10+uint64(t[i]-'0'), nd+1, exp-1
		}
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		i++
		eneg := false
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			eneg = t[i] == '-'
			i++
		}
		e := 0
		for ; i < len(t) && t[i] >= '0' && t[i] <= '9'; i++ {
			if e > 1000 {
				return 0, false
			}
			e = e*10 + int(t[i]-'0')
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(t) || m >= 1<<53 || exp < -22 || exp > 22 {
		return 0, false
	}
	f := float64(m)
	if m == 0 {
		f = 0
	} else if exp >= 0 {
		f *= pow10[exp]
	} else {
		f /= pow10[-exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// floatPool recycles vectors' backing arrays: a handler that is done with
// a decoded Vector hands it back with putFloats.
var floatPool sync.Pool

// takeFloats returns an empty slice with room for n floats.
func takeFloats(n int) []float64 {
	if p, ok := floatPool.Get().(*[]float64); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]float64, 0, n)
}

// putFloats recycles v's array; v must not be used afterwards.
func putFloats(v Vector) {
	if cap(v) > 0 && cap(v) <= 1<<16 {
		f := []float64(v[:0])
		floatPool.Put(&f)
	}
}
