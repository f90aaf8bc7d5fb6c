package httpapi

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
)

var searchBodies = []string{
	`{"vector":[1,2.5,-3e-2],"k":10}`,
	` { "vector" : [ 0.1 , 0.2 ] , "k" : 3 , "method_parameters" : { "ef_search" : 100 } , "filter" : { "ids" : [ 1 , -2 , 3 ] } , "rescore" : { "oversample_factor" : 2.0 } , "profile" : true } `,
	`{"vector":[1],"filter":{"ids":[]},"profile":false,"rescore":{},"method_parameters":{}}`,
	`{}`,
	`{"vector":[]}`,
	`{"vector_b64":"AACAPwAAAEA=","k":2}`,
	` { "k" : 1 , "vector_b64" : "AACAPwAAAEA" } `,
	`{"vector_b64":""}`,
	// Declined by the fast parser, decided by encoding/json:
	`{"vector":[1],"vector_b64":"AACAPw=="}`,
	`{"vector_b64":"AACAPw==","vector":[]}`,
	`{"vector_b64":null}`,
	`{"vector_b64":"AAC\/Pw=="}`,
	`{"vector_b64":"AA*A"}`,
	`{"vector_b64":7}`,
	`{"vector_b64":"AAAA","vector_b64":"AAAA"}`,
	`{"vector_b64":"AB=="}`,
	`{"vector_b64":"AAAA\nAAAA"}`,
	`{"vectors_b64":["AAAA"]}`,
	`{"vector_b64":"AAAA"`,
	`{"Vector":[1],"k":1}`,
	`{"vector":[1],"k":1,"k":2}`,
	`{"vector":null}`,
	`{"vector":[1],"k":1.0}`,
	`{"vector":[1],"k":1e1}`,
	`{"vector":[1],"k":99999999999999999999}`,
	`{"vector":[1,"a"]}`,
	`{"vector":[01]}`,
	`{"vector":[1],"extra":1}`,
	`{"vector":[1]} x`,
	`{"vector":[1],"filter":{"ids":[1.5]}}`,
	`{"vector":[1],"method_parameters":{"ef_search":5,"x":1}}`,
	`{"vector":[1],"rescore":{"oversample_factor":1e999}}`,
	`{"vector":[1],"profile":tru}`,
	`{"vect\u006fr":[1]}`,
	`{"vector":[1],"K":2}`,
	`{"vector":[1],"\u212a":2}`,
	`{"vector":[1],"method_parameters":{"ef_search":5,"ef_search":6}}`,
	`{"vector":[1],"method_parameters":{"EF_SEARCH":5}}`,
	`{"vector":[1],"filter":{"ids":[1],"ids":[2]}}`,
	`{"vector":[1],"rescore":{"Oversample_factor":2}}`,
	`{"vector":[1]`,
	`[1,2]`,
	``,
}

// strict is what decode does with encoding/json: decodeJSON, whose rule
// (unknown fields, a key in another case than its field's or given twice,
// data after the value: all refused) the fast parser must follow.
func strict(b []byte, r any) error { return decodeJSON(b, r) }

// checkFast: what fast accepts of b, encoding/json accepts with the same
// result.
func checkFast[T any](t *testing.T, b []byte, fast func([]byte, *T) bool) {
	var got T
	if !fast(b, &got) {
		return
	}
	var want T
	if err := strict(b, &want); err != nil {
		t.Fatalf("%q: the fast parser accepted what encoding/json rejects: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: fast %+v, encoding/json %+v", b, got, want)
	}
}

func checkSearchFast(t *testing.T, b []byte) { checkFast(t, b, searchFast) }

// checkBodies: fast takes the first taken bodies and declines the rest,
// and gives what encoding/json gives for each it takes.
func checkBodies[T any](t *testing.T, bodies []string, taken int, fast func([]byte, *T) bool) {
	for i, b := range bodies {
		var r T
		if ok, want := fast([]byte(b), &r), i < taken; ok != want {
			t.Errorf("%q: fast parser took it: %v, want %v", b, ok, want)
		}
		checkFast(t, []byte(b), fast)
	}
}

// TestSearchFast: the fast parser takes the usual bodies and gives what
// encoding/json gives; what it declines still decodes (or fails) as before.
func TestSearchFast(t *testing.T) { checkBodies(t, searchBodies, 8, searchFast) }

var msearchBodies = []string{
	`{"vectors":[[1,2.5],[-3e-2,4]],"k":10}`,
	` { "vectors" : [ [ 0.1 , 0.2 ] ] , "k" : 3 , "method_parameters" : { "ef_search" : 100 } , "filter" : { "ids" : [ 1 ] } , "rescore" : { "oversample_factor" : 2.0 } , "profile" : true } `,
	`{"vectors":[]}`,
	`{"vectors":[[]],"k":1}`,
	`{}`,
	`{"vectors_b64":["AACAPw==","AAAAQA"],"k":1}`,
	`{"vectors_b64":[]}`,
	`{"vectors_b64":[""], "profile":true}`,
	// Declined by the fast parser, decided by encoding/json:
	`{"vectors_b64":null}`,
	`{"vectors_b64":["AACAPw==",null]}`,
	`{"vectors":[[1]],"vectors_b64":["AACAPw=="]}`,
	`{"vectors_b64":["AACAPw=="],"vectors":[]}`,
	`{"vectors_b64":"AACAPw=="}`,
	`{"vector_b64":"AACAPw=="}`,
	`{"vectors_b64":["A\u0041AA"]}`,
	`{"vectors":null}`,
	`{"vectors":[null]}`,
	`{"vectors":[[1],null]}`,
	`{"vectors":[1,2]}`,
	`{"vectors":[[1]],"vectors":[[2]]}`,
	`{"vectors":[[1]],"vector":[2]}`,
	`{"VECTORS":[[1]]}`,
	`{"vectors":[[1]],"k":1,"k":1}`,
	`{"vectors":[[1]],"max_distance":3}`,
	`{"vectors":[[1],]}`,
	`{"vectors":[[1]] ]}`,
	`{"vectors":[[1,"a"]]}`,
	`{"vectors":[[1]`,
}

func checkMsearchFast(t *testing.T, b []byte) { checkFast(t, b, msearchFast) }

// TestMsearchFast: the fast parser takes the usual _msearch bodies and gives
// what encoding/json gives.
func TestMsearchFast(t *testing.T) { checkBodies(t, msearchBodies, 8, msearchFast) }

// FuzzMsearchFast: whatever the fast parser accepts of an _msearch body,
// encoding/json accepts with the same result.
//
//	go test -run='^$' -fuzz=FuzzMsearchFast -fuzztime=100000x ./httpapi
func FuzzMsearchFast(f *testing.F) {
	for _, b := range msearchBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(checkMsearchFast)
}

// FuzzSearchFast: whatever the fast parser accepts, encoding/json accepts
// with the same result.
//
//	go test -run='^$' -fuzz=FuzzSearchFast -fuzztime=1m ./httpapi
func FuzzSearchFast(f *testing.F) {
	for _, b := range searchBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(checkSearchFast)
}

// TestExactDecimal: where exactDecimal answers, it is bit for bit
// strconv.ParseFloat's value (signed zeros included), over float32 values
// as %g writes them, random digit strings and edge cases; and it answers
// for the common forms.
func TestExactDecimal(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var cases []string
	for range 200000 {
		f := math.Float32frombits(r.Uint32())
		if f != f || math.IsInf(float64(f), 0) {
			continue
		}
		cases = append(cases, strconv.FormatFloat(float64(f), 'g', -1, 32), strconv.FormatFloat(float64(f), 'f', -1, 32))
		cases = append(cases, strconv.FormatFloat(r.NormFloat64(), 'g', -1, 64), strconv.FormatFloat(r.NormFloat64(), 'g', 9, 32))
		var b []byte
		if r.IntN(2) == 0 {
			b = append(b, '-')
		}
		b = strconv.AppendUint(b, r.Uint64N(1<<uint(r.IntN(62)+1)), 10)
		if r.IntN(2) == 0 {
			b = append(b, '.')
			b = strconv.AppendUint(b, r.Uint64N(1e9), 10)
		}
		if r.IntN(2) == 0 {
			b = append(b, 'e')
			b = strconv.AppendInt(b, int64(r.IntN(60)-30), 10)
		}
		cases = append(cases, string(b))
	}
	cases = append(cases, "0", "-0", "0.0", "-0.0e5", "1e22", "1e23", "9007199254740991", "9007199254740992",
		"1e-22", "1e-23", "9007199254740993", "9007199254740993e-19", "18446744073709551615", "18446744073709551615e-19", "0.9999999999999999999", "4503599627370496.5", "4503599627370497.5", "1.0000000000000001110223024625156540e0", "123456789012345678e19", "0.000000000000000000001", "123456789012345678", "1234567890123456789", "12345678901234567890",
		"0.1", "-0.1", "1E+2", "1e-0", "00.5", "4.9e-324", "1.7976931348623157e308", "1e400", "1e-400", "1e99999999999")
	answered := 0
	for _, c := range cases {
		got, ok := exactDecimal([]byte(c))
		if !ok {
			continue
		}
		answered++
		want, err := strconv.ParseFloat(c, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactDecimal(%q) = %v (%#x), strconv %v (%#x, %v)", c, got, math.Float64bits(got), want, math.Float64bits(want), err)
		}
	}
	for range 300000 { // 19-digit integers times 10^e, |e| ≤ 19: the 128-bit paths
		m, e := r.Uint64N(1e19), r.IntN(39)-19
		c := strconv.FormatUint(m, 10) + "e" + strconv.Itoa(e)
		got, ok := exactDecimal([]byte(c))
		want, _ := strconv.ParseFloat(c, 64)
		if !ok || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactDecimal(%q) = %v, %v; strconv %v", c, got, ok, want)
		}
	}
	for range 200000 { // what Python's json writes for float32 values: 17 digits
		f := float64(math.Float32frombits(r.Uint32()))
		if f != f || math.IsInf(f, 0) {
			continue
		}
		c := strconv.FormatFloat(f, 'g', 17, 64)
		got, ok := exactDecimal([]byte(c))
		if a := math.Abs(f); !ok && a >= 1e-3 && a < 1e19 { // m·10^e with |e| ≤ 19
			t.Fatalf("exactDecimal(%q) declined a 17-digit number", c)
		}
		if want, _ := strconv.ParseFloat(c, 64); ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactDecimal(%q) = %v, strconv %v", c, got, want)
		}
	}
	for _, c := range []string{"0.123456789", "-3.5", "12", "1e-7", "-1.25e3", "0", "0.30000001192092896", "-1234.5678901234567", "1844674407370955161", "9999999999999999999e19", "1e-19"} {
		if _, ok := exactDecimal([]byte(c)); !ok {
			t.Errorf("exactDecimal(%q) declined a common form", c)
		}
	}
	if answered < len(cases)/3 {
		t.Errorf("exactDecimal answered %d of %d cases", answered, len(cases))
	}
}

// FuzzExactDecimal: decimal takes a whole string exactly when it is one
// JSON number (encoding/json as the judge), and exactDecimal never
// disagrees with strconv on one it converts.
func FuzzExactDecimal(f *testing.F) {
	for _, s := range []string{"0", "-1.5e-3", "123456789012345678", "1e22", "0.000001", "00.5", "1.", "-", "1e", "1e+", ".5", "-0.0e-0", "12345678901234567890123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// decimal's scan is JSON's number grammar: it takes all of s exactly
		// when encoding/json reads s as one number.
		_, end, _, ok := decimal([]byte(s), 0)
		digit := func(c byte) bool { return c >= '0' && c <= '9' }
		isNumber := len(s) > 0 && (s[0] == '-' || digit(s[0])) && digit(s[len(s)-1]) && json.Valid([]byte(s))
		if whole := ok && end == len(s); whole != isNumber {
			t.Fatalf("decimal(%q): ok %v, end %d of %d; encoding/json reads a number: %v", s, ok, end, len(s), isNumber)
		}
		if !isNumber {
			return
		}
		got, ok := exactDecimal([]byte(s))
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactDecimal(%q) = %v, strconv %v (%v)", s, got, want, err)
		}
	})
}

// exactDecimal is decimal on a whole number's text: the value when decimal
// converts it itself.
func exactDecimal(t []byte) (float64, bool) {
	f, end, exact, ok := decimal(t, 0)
	return f, ok && exact && end == len(t)
}

// TestEightDigits: the 8-digit step accepts exactly eight ASCII digits (a
// non-digit anywhere, just below '0' or above '9' included, is refused) and
// reads their value.
func TestEightDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for range 20000 {
		var w [8]byte
		for j := range w {
			w[j] = '0' + byte(r.IntN(10))
		}
		v := binary.LittleEndian.Uint64(w[:])
		want, _ := strconv.ParseUint(string(w[:]), 10, 64)
		if !eightDigits(v) || eightValue(v) != want {
			t.Fatalf("%q: digits %v value %d, want true %d", w, eightDigits(v), eightValue(v), want)
		}
		for _, bad := range []byte{' ', '/', ':', '.', 'e', '-', 0, 0x7F, 0x80, 0xB0, 0xFF} {
			x := w
			x[r.IntN(8)] = bad
			if eightDigits(binary.LittleEndian.Uint64(x[:])) {
				t.Fatalf("%q taken for eight digits", x)
			}
		}
	}
	for _, c := range []struct {
		s   string
		ok  bool
		end int
	}{{"1.0 000000", true, 3}, {"0.1234567e", false, 10}, {"0.12345678", true, 10}, {"-0.00000000123456789012", true, 23}} {
		f, end, exact, ok := decimal([]byte(c.s), 0)
		if ok != c.ok || end != c.end {
			t.Errorf("decimal(%q): ok %v end %d, want %v %d", c.s, ok, end, c.ok, c.end)
			continue
		}
		if want, err := strconv.ParseFloat(c.s[:end], 64); ok && (!exact || err != nil || f != want) {
			t.Errorf("decimal(%q) = %v (exact %v), strconv %v %v", c.s, f, exact, want, err)
		}
	}
}
