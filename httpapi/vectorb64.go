package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// VectorB64 is a "vector_b64": a vector's bytes in standard base64 (RFC
// 4648 §4's alphabet, with or without its '=' padding): the little-endian
// float32 components of a float index's vector, or a binary index's packed
// code. It holds the bytes decoded; what they mean waits for the index
// (query.values), which the body is decoded before.
type VectorB64 struct {
	b   []byte
	set bool // given (an empty string too)
}

// maxB64Bytes bounds a vector_b64's bytes before any is decoded: MaxVectorLen
// float32 values.
const maxB64Bytes = 4 * MaxVectorLen

// The encodings a vector_b64 may use: padded when its length is a multiple
// of 4 and it ends in '=', else unpadded; both refuse set bits after the
// last byte's (Strict), so each vector has one spelling in each.
var (
	b64Padded   = base64.StdEncoding.Strict()
	b64Unpadded = base64.RawStdEncoding.Strict()
)

// UnmarshalJSON implements json.Unmarshaler.
func (v *VectorB64) UnmarshalJSON(b []byte) error { return v.decode(b, "vector_b64") }

// decode reads the JSON string b (escapes allowed) into v, reusing v's
// array; name is the field's in errors.
func (v *VectorB64) decode(b []byte, name string) error {
	if string(b) == "null" {
		return fmt.Errorf("%s must be a base64 string, not null", name)
	}
	s, ok := plainString(b)
	if !ok {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return fmt.Errorf("%s must be a base64 string, got %s", name, gotText(te.Value))
			}
			return fmt.Errorf("%s: %s", name, decodeErrorText(err))
		}
		s = []byte(str)
	}
	out, err := decodeB64(v.b[:0], s)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	v.b, v.set = out, true
	return nil
}

// plainString is the text of the JSON string b when it has no escapes and
// no control characters (what base64 text is), the quotes stripped.
func plainString(b []byte) ([]byte, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return nil, false
	}
	s := b[1 : len(b)-1]
	for _, c := range s {
		if c < 0x20 || c == '"' || c == '\\' {
			return nil, false
		}
	}
	return s, true
}

// decodeB64 decodes the base64 text s into dst's array (grown when short)
// and returns the bytes. Line breaks, which encoding/base64 skips, are
// refused (a vector has one spelling): found by the bytes decoded being
// too few for s's length, so text without them is read once.
func decodeB64(dst, s []byte) ([]byte, error) {
	enc := b64Encoding(s)
	n := enc.DecodedLen(len(s))
	if n > maxB64Bytes {
		return nil, fmt.Errorf("more than %d bytes (%d float32 values) in %d characters of base64", maxB64Bytes, MaxVectorLen, len(s))
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	n, err := enc.Decode(dst[:n], s)
	if err != nil || enc.EncodedLen(n) != len(s) {
		if i := bytes.IndexAny(s, "\r\n"); i >= 0 {
			err = base64.CorruptInputError(i) // where it is, not what it put off
		}
		return nil, b64Error(err)
	}
	return dst[:n], nil
}

// b64Encoding is the encoding base64 text s is read with: padded when its
// length is a multiple of 4 and it ends in '='.
func b64Encoding(s []byte) *base64.Encoding {
	if len(s)%4 == 0 && len(s) > 0 && s[len(s)-1] == '=' {
		return b64Padded
	}
	return b64Unpadded
}

func b64Error(err error) error {
	var ce base64.CorruptInputError
	if errors.As(err, &ce) {
		return fmt.Errorf("not standard base64 (A–Z, a–z, 0–9, '+', '/', '=' padding optional): bad character or length at character %d", int64(ce))
	}
	return err
}

// VectorsB64 is an _msearch's "vectors_b64": a list of vector_b64 strings.
type VectorsB64 []VectorB64

// UnmarshalJSON implements json.Unmarshaler.
func (l *VectorsB64) UnmarshalJSON(b []byte) error {
	const name = "vectors_b64"
	if string(b) == "null" {
		return fmt.Errorf("%s must be a list of base64 strings, not null", name)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s must be a list of base64 strings, got %s", name, gotText(te.Value))
		}
		return fmt.Errorf("%s: %s", name, decodeErrorText(err))
	}
	out := make(VectorsB64, len(raw))
	for i, r := range raw {
		if err := out[i].decode(r, name+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	*l = out
	return nil
}

// query is one query's vector as its request gave it: decimal values, or
// a vector_b64's bytes, read as the index needs them (values).
type query struct {
	vec Vector
	b64 *VectorB64 // nil: vec
	i   int        // b64's place in vectors_b64; −1: a _search's vector_b64
}

// field names q's vector_b64 in errors.
func (q query) field() string {
	if q.i < 0 {
		return "vector_b64"
	}
	return "vectors_b64[" + strconv.Itoa(q.i) + "]"
}

// values is q's vector as h's index takes it: the decimal values as they
// are, or vector_b64's bytes read into buf's array (grown when short):
// float32 components, little-endian, or a binary index's code bytes, one
// value each. A length that does not fit the index and a component that
// is not finite are 400s naming the field, as the engine's are for a
// decimal vector. buf is returned for the caller to keep.
func (q query) values(h *handle, buf []float64) (Vector, []float64, error) {
	if q.b64 == nil {
		return q.vec, buf, nil
	}
	return q.read(h.x.Dim(), h.x.Binary(), h.spec.Path, buf)
}

// read is values for an index of d values (bytes when binary) that errors
// call label.
func (q query) read(d int, binary bool, label string, buf []float64) (Vector, []float64, error) {
	if q.b64 == nil {
		return q.vec, buf, nil
	}
	raw := q.b64.b
	if binary {
		if len(raw) != d {
			return nil, buf, badRequest("%s holds %d bytes, index %s expects %d (its %d-bit codes)", q.field(), len(raw), label, d, 8*d)
		}
		buf = growFloats(buf, d)
		for i, c := range raw {
			buf[i] = float64(c)
		}
		return buf, buf, nil
	}
	if len(raw)%4 != 0 {
		return nil, buf, badRequest("%s holds %d bytes, not a whole number of float32 values (4 bytes each); index %s expects %d values (%d bytes)",
			q.field(), len(raw), label, d, 4*d)
	}
	if len(raw)/4 != d {
		return nil, buf, badRequest("%s holds %d float32 values (%d bytes), index %s expects %d (%d bytes)", q.field(), len(raw)/4, len(raw), label, d, 4*d)
	}
	buf = growFloats(buf, d)
	for i := range buf {
		u := le.Uint32(raw[4*i:])
		if u&0x7f800000 == 0x7f800000 { // exponent all ones: ±Inf or NaN
			return nil, buf, badRequest("%s value %d (%v) is not a finite float32", q.field(), i, math.Float32frombits(u))
		}
		buf[i] = float64(math.Float32frombits(u))
	}
	return buf, buf, nil
}

var le = binary.LittleEndian

// growFloats returns b[:n], reallocated only when its capacity is short.
func growFloats(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}
