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

// parseNumbers parses "[n, n, …]" (or null) into dst; ok is false for
// anything else, which the caller hands to encoding/json.
func parseNumbers(b []byte, dst []float64) ([]float64, bool) {
	i := skipSpace(b, 0)
	if i+4 <= len(b) && string(b[i:i+4]) == "null" && skipSpace(b, i+4) == len(b) {
		return nil, true
	}
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, skipSpace(b, i+1) == len(b)
	}
	for {
		j := i
		for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || (b[j] >= '0' && b[j] <= '9')) {
			j++
		}
		if j == i {
			return nil, false
		}
		f, err := strconv.ParseFloat(string(b[i:j]), 64)
		if err != nil || b[i] == '+' || (b[i] == '0' && j > i+1 && b[i+1] >= '0' && b[i+1] <= '9') {
			return nil, false // not JSON's number grammar: let encoding/json say why
		}
		dst = append(dst, f)
		i = skipSpace(b, j)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return dst, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
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
