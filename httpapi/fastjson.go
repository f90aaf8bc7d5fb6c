package httpapi

import (
	"bytes"
	"strconv"
)

// searchFast parses the usual shape of a search body — the fields of
// SearchRequest spelled exactly, each at most once, plain numbers, no string
// escapes — without reflection: encoding/json scans a body's vector three
// times (whole-body scan, skip, then Vector's own parse), a large share of
// a search's CPU. It reports false for anything else, and the caller hands
// the body to encoding/json, which then decides, with its own errors; for
// what it accepts, the result is what encoding/json would produce
// (FuzzSearchFast checks this).
func searchFast(b []byte, r *SearchRequest) bool {
	return fastBody(b, fastFields{vector: &r.Vector, vectorB64: &r.VectorB64, k: &r.K, method: &r.MethodParameters,
		filter: &r.Filter, rescore: &r.Rescore, profile: &r.Profile})
}

// msearchFast is searchFast for an _msearch body (its "vectors"): beside
// the reflection, encoding/json's decoder copied the whole body into a
// buffer of its own (FuzzMsearchFast checks it against encoding/json).
func msearchFast(b []byte, r *MSearchRequest) bool {
	return fastBody(b, fastFields{vectors: &r.Vectors, vectorsB64: &r.VectorsB64, k: &r.K, method: &r.MethodParameters,
		filter: &r.Filter, rescore: &r.Rescore, profile: &r.Profile})
}

// fastFields are where fastBody puts a search body's fields: "vector" and
// "vector_b64" (_search) or "vectors" and "vectors_b64" (_msearch),
// whichever are not nil, and the rest both have. (No function value for
// the vectors: calling one made the cursor escape to the heap, an
// allocation per request.)
type fastFields struct {
	vector     *Vector
	vectorB64  *VectorB64
	vectors    *[]Vector
	vectorsB64 *VectorsB64
	k          *IntParam
	method     **MethodParameters
	filter     **IDFilter
	rescore    **Rescore
	profile    *bool
}

// fastBody parses an object of f's fields, each at most once.
func fastBody(b []byte, f fastFields) bool {
	p := cursor{b: b}
	if !p.consume('{') {
		return false
	}
	var seen uint8
	if !p.consume('}') {
		for {
			key, ok := p.key()
			if !ok {
				return false
			}
			var bit uint8
			switch string(key) { // no allocation for a switch on a conversion
			case "vector":
				bit, ok = 1, f.vector != nil && p.vector(f.vector)
			case "vectors":
				bit, ok = 1, f.vectors != nil && p.vectors(f.vectors)
			case "vector_b64":
				bit, ok = 64, f.vectorB64 != nil && p.b64(f.vectorB64, nil)
			case "vectors_b64":
				bit, ok = 64, f.vectorsB64 != nil && p.b64s(f.vectorsB64)
			case "k":
				bit = 2
				f.k.V, ok = p.integer()
				f.k.Set = true
			case "method_parameters":
				bit = 4
				m := &MethodParameters{}
				*f.method = m
				ok = p.object("ef_search", func() bool { v, ok := p.integer(); m.EfSearch = v; return ok })
			case "filter":
				bit = 8
				flt := &IDFilter{}
				*f.filter = flt
				ok = p.object("ids", func() bool { return p.ids((*[]int64)(&flt.IDs)) })
			case "rescore":
				bit = 16
				rs := &Rescore{}
				*f.rescore = rs
				ok = p.object("oversample_factor", func() bool { v, ok := p.float(); rs.OversampleFactor = v; return ok })
			case "profile":
				bit = 32
				*f.profile, ok = p.boolean()
			default:
				return false
			}
			if !ok || seen&bit != 0 || (seen|bit)&(1|64) == 1|64 { // both forms of the vectors: encoding/json's error
				return false
			}
			seen |= bit
			if p.consume(',') {
				continue
			}
			if p.consume('}') {
				break
			}
			return false
		}
	}
	p.space()
	return p.i == len(p.b)
}

// cursor walks a JSON text; every method skips leading white space.
type cursor struct {
	b []byte
	i int
}

func (p *cursor) space() { p.i = skipSpace(p.b, p.i) }

func (p *cursor) consume(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// key reads `"name":` where name has no escapes.
func (p *cursor) key() ([]byte, bool) {
	if !p.consume('"') {
		return nil, false
	}
	j := bytes.IndexByte(p.b[p.i:], '"')
	if j < 0 {
		return nil, false
	}
	k := p.b[p.i : p.i+j]
	if bytes.IndexByte(k, '\\') >= 0 {
		return nil, false
	}
	p.i += j + 1
	if !p.consume(':') {
		return nil, false
	}
	return k, true
}

// number returns the next JSON number's text, in JSON's grammar (decimal's
// scan).
func (p *cursor) number() ([]byte, bool) {
	p.space()
	_, end, _, ok := decimal(p.b, p.i)
	if !ok {
		return nil, false
	}
	t := p.b[p.i:end]
	p.i = end
	return t, true
}

// integer reads a number without fraction or exponent that fits an int
// (encoding/json rejects the others for an int field).
func (p *cursor) integer() (int, bool) {
	t, ok := p.number()
	if !ok || bytes.ContainsAny(t, ".eE") {
		return 0, false
	}
	v, err := strconv.ParseInt(string(t), 10, 0)
	return int(v), err == nil
}

func (p *cursor) float() (float64, bool) {
	t, ok := p.number()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(t), 64)
	return v, err == nil
}

func (p *cursor) boolean() (bool, bool) {
	p.space()
	switch {
	case bytes.HasPrefix(p.b[p.i:], []byte("true")):
		p.i += 4
		return true, true
	case bytes.HasPrefix(p.b[p.i:], []byte("false")):
		p.i += 5
		return false, true
	}
	return false, false
}

// vector reads an array of numbers with Vector's own parser.
func (p *cursor) vector(v *Vector) bool {
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != '[' {
		return false
	}
	end := bytes.IndexByte(p.b[p.i:], ']')
	if end < 0 {
		return false
	}
	if err := v.UnmarshalJSON(p.b[p.i : p.i+end+1]); err != nil {
		return false
	}
	p.i += end + 1
	return true
}

// vectors reads an array of vectors (a null anywhere: encoding/json's).
func (p *cursor) vectors(dst *[]Vector) bool {
	out := []Vector{}
	if !p.array(func() bool {
		var v Vector
		ok := p.vector(&v)
		out = append(out, v)
		return ok
	}) {
		return false
	}
	*dst = out
	return true
}

// b64 reads a vector_b64 string into v: into the free end of arena's
// array when it has room (its bytes then taken from there), else into v's
// own. A string with an escape or a character base64 has not fails to
// decode, and is left to encoding/json.
func (p *cursor) b64(v *VectorB64, arena *[]byte) bool {
	if !p.consume('"') {
		return false
	}
	j := bytes.IndexByte(p.b[p.i:], '"')
	if j < 0 {
		return false
	}
	s, dst := p.b[p.i:p.i+j], v.b[:0]
	if arena != nil {
		a, m := *arena, b64Encoding(s).DecodedLen(j)
		if m > 0 && cap(a)-len(a) >= m {
			dst = a[len(a) : len(a) : len(a)+m]
			*arena = a[:len(a)+m]
		}
	}
	out, err := decodeB64(dst, s)
	if err != nil {
		return false
	}
	v.b, v.set = out, true
	p.i += j + 1
	return true
}

// b64s reads an array of vector_b64 strings, their bytes decoded into one
// array: a first pass over the strings sizes it and the list.
func (p *cursor) b64s(dst *VectorsB64) bool {
	n, size := p.b64Sizes()
	out, arena := make(VectorsB64, 0, n), make([]byte, 0, size)
	if !p.array(func() bool {
		var v VectorB64
		ok := p.b64(&v, &arena)
		out = append(out, v)
		return ok
	}) {
		return false
	}
	*dst = out
	return true
}

// b64Sizes counts the base64 strings of the array at p and what they take
// decoded, up to the first thing that is not one (the parse then stops
// there). It moves nothing.
func (p *cursor) b64Sizes() (n, size int) {
	q := cursor{b: p.b, i: p.i}
	if !q.consume('[') {
		return 0, 0
	}
	for q.consume('"') {
		j := bytes.IndexByte(q.b[q.i:], '"')
		if j < 0 {
			break
		}
		n, size = n+1, size+b64Encoding(q.b[q.i:q.i+j]).DecodedLen(j)
		q.i += j + 1
		if !q.consume(',') {
			break
		}
	}
	return n, size
}

// ids reads an array of integers.
func (p *cursor) ids(dst *[]int64) bool {
	out := []int64{}
	if !p.array(func() bool {
		t, ok := p.number()
		if !ok || bytes.ContainsAny(t, ".eE") {
			return false
		}
		v, err := strconv.ParseInt(string(t), 10, 64)
		out = append(out, v)
		return err == nil
	}) {
		return false
	}
	*dst = out
	return true
}

// array reads `[]` or `[e, …]` with each element read by elem.
func (p *cursor) array(elem func() bool) bool {
	if !p.consume('[') {
		return false
	}
	if p.consume(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if !p.consume(',') {
			return p.consume(']')
		}
	}
}

// object reads `{}` or `{"name": value}` with value read by val.
func (p *cursor) object(name string, val func() bool) bool {
	if !p.consume('{') {
		return false
	}
	if p.consume('}') {
		return true
	}
	if k, ok := p.key(); !ok || string(k) != name || !val() {
		return false
	}
	return p.consume('}')
}
