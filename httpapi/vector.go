package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
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
		dst = make([]float64, 0, n) // once, not regrown per append
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
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, false
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
