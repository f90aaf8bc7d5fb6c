package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/gin-gonic/gin"
)

// decode reads a JSON body strictly: unknown fields and trailing data are
// 400s. The body is read before any search slot is taken (a slow client
// holds about the bytes it has sent, charged to max_bodies_in_flight).
// Once decoded, the body is dropped and what decoding made (the vectors,
// often larger than their text: "0," is 8 bytes as a float64) is charged
// in its place until the caller releases b (on error, decode has).
// Search bodies of the usual shape take a parser without reflection
// (searchFast, msearchFast); everything else, and every error, goes
// through encoding/json.
func (s *Server) decode(c *gin.Context, v any, b *body) error {
	err := s.read(c, b)
	var bound int64 // what decoding may make, charged while it runs
	if err == nil {
		bound, err = s.chargeDecode(v, b)
	}
	if err == nil {
		raw := b.buf.b
		switch r := v.(type) {
		case *SearchRequest:
			if !searchFast(raw, r) {
				// Forget what the fast parser filled in. Vector starts nil, so
				// that checkDecoded sees whether the body gave one.
				*r = SearchRequest{VectorB64: VectorB64{b: r.VectorB64.b[:0]}}
				err = decodeJSON(raw, v)
			}
		case *MSearchRequest:
			if !msearchFast(raw, r) {
				*r = MSearchRequest{}
				err = decodeJSON(raw, v)
			}
		case *msearchLines:
			err = s.parseMsearch(raw, r)
		default:
			err = decodeJSON(raw, v)
		}
	}
	if err != nil {
		s.bodyMem.give(bound)
		s.release(b)
		return err
	}
	// The body goes; what decoding made stays charged, as it is (the
	// bound's estimate of the slices' capacities can be short of append's
	// doubling).
	made := decodedBytes(v)
	s.bodyMem.give(b.held + bound - made)
	b.held = made
	s.dropBuf(b)
	return nil
}

// chargeDecode charges, before a search body is decoded, a bound on what
// decoding it makes: a vector per '[' at most (its slice header) and a
// value per ',' or '[' at most (8 bytes each); for base64 vectors, an
// element per string that is not a key and 3 bytes per 4 of its
// characters. Decoding a body of tiny vectors ("[0],") makes 10 to 15 times
// its size, which must be counted before it is made; an _msearch with more
// arrays than max_msearch_vectors (and its own and a filter's) allow, or more
// such strings, is refused before it is decoded. The body (b, read) stays
// while it decodes: a request whose body and bound together exceed
// max_bodies_in_flight could never be decoded, even alone, and is a 413,
// not a 429 to retry for ever; one that fits only without its buffer's
// slack (a chunked body's buffer grows by doubling) is moved to a buffer of
// its size first.
func (s *Server) chargeDecode(v any, b *body) (int64, error) {
	raw := b.buf.b
	_, multi := v.(*MSearchRequest)
	_, lines := v.(*msearchLines)
	if _, single := v.(*SearchRequest); !single && !multi && !lines {
		return 0, nil
	}
	arrays := int64(bytes.Count(raw, []byte{'['}))
	if multi && arrays > int64(s.limits.MaxMsearchVectors)+2 {
		return 0, badRequest("_msearch has more than %d vectors (max_msearch_vectors): the body holds %d arrays", s.limits.MaxMsearchVectors, arrays)
	}
	strs, text := valueStrings(raw)
	if multi && strs > int64(s.limits.MaxMsearchVectors) {
		return 0, badRequest("_msearch has more than %d vectors (max_msearch_vectors): the body holds %d strings", s.limits.MaxMsearchVectors, strs)
	}
	size := int64(len(raw))
	bound := arrays*vectorHeader + (arrays+int64(bytes.Count(raw, []byte{','})))*valueBytes
	bound += strs*b64Header + (3*text+3)/4 // a vector_b64 per string at most, 3 bytes per 4 characters
	if lines {
		// Each search: its request, header and plan; each object (a
		// filters entry) its map slot and filter; and the names the lines
		// hold, at most the body's bytes.
		n := int64(bytes.Count(raw, []byte{'\n'})) + 1
		if n > 2*int64(s.limits.MaxMsearchVectors)+1 {
			return 0, badRequest("_msearch has more than %d searches (max_msearch_vectors): the body holds %d lines", s.limits.MaxMsearchVectors, n)
		}
		bound += n*searchBytes + int64(bytes.Count(raw, []byte{'{'}))*objectBytes + size
	} else if bytes.Contains(raw, []byte(`"filters"`)) {
		bound += int64(bytes.Count(raw, []byte{'{'}))*objectBytes + size // a filter and a name per index
	}
	if size+bound <= s.bodyMem.max && b.held+bound > s.bodyMem.max {
		exact := &bodyBuf{b: make([]byte, size)}
		copy(exact.b, raw)
		s.dropBuf(b)
		b.buf = exact
		s.bodyMem.give(b.held - size)
		b.held = size
	}
	switch {
	case size+bound > s.bodyMem.max:
		return 0, errTooLarge("request_too_large", fmt.Sprintf(
			"the request's vectors may take %d bytes once decoded, beside its %d-byte body: more than max_bodies_in_flight (%d)", bound, size, s.bodyMem.max))
	case !s.bodyMem.take(bound):
		return 0, errBodiesBusy
	}
	return bound, nil
}

// The sizes decoding makes: a vector's slice header, and a vector's value
// (a filter's id takes as much); a vectors_b64 element.
const (
	vectorHeader = int64(unsafe.Sizeof(Vector{}))
	valueBytes   = int64(unsafe.Sizeof(Vector{}[0]))
	b64Header    = int64(unsafe.Sizeof(VectorB64{}))
	// searchBytes is what one search of an NDJSON _msearch takes beside
	// its vector: its request, header and plan; objectBytes what an object
	// may make (a filters entry: its map slot and filter).
	searchBytes = int64(unsafe.Sizeof(SearchRequest{})+unsafe.Sizeof(msearchHead{})+unsafe.Sizeof(multiSearch{})) + 256
	objectBytes = 96
)

// valueStrings counts the strings of the JSON text b that are not keys (a
// valid search body's are its vector_b64 or vectors_b64), and their
// characters, escapes included: what decoding them as base64 may make is
// bounded by these. A decimal body has none, so its bound is as it was.
func valueStrings(b []byte) (n, chars int64) {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return n, chars
		}
		start := i + j + 1
		end := start
		for { // the closing quote: one not escaped by an odd run of '\'
			k := bytes.IndexByte(b[end:], '"')
			if k < 0 {
				return n + 1, chars + int64(len(b)-start) // unterminated: count it all
			}
			end += k
			bs := 0
			for bs < end-start && b[end-1-bs] == '\\' {
				bs++
			}
			if bs%2 == 0 {
				break
			}
			end++
		}
		i = end + 1
		if k := skipSpace(b, i); k < len(b) && b[k] == ':' {
			continue // a key
		}
		n, chars = n+1, chars+int64(end-start)
	}
}

// decodedBytes is what a decoded request body holds beyond its struct:
// its vectors and filter ids.
func decodedBytes(v any) int64 {
	ids := func(f *IDFilter) int64 {
		if f == nil {
			return 0
		}
		return int64(cap(f.IDs)) * int64(unsafe.Sizeof(f.IDs[0]))
	}
	search := func(r *SearchRequest) int64 {
		n := int64(cap(r.Vector))*valueBytes + int64(cap(r.VectorB64.b)) + ids(r.Filter)
		for k, f := range r.Filters {
			n += objectBytes + int64(len(k)) + ids(f)
		}
		return n
	}
	switch r := v.(type) {
	case *SearchRequest:
		return search(r)
	case *msearchLines:
		n := int64(cap(r.reqs)) * searchBytes
		for i := range r.reqs {
			n += search(&r.reqs[i]) + int64(len(r.heads[i].Index))
		}
		return n
	case *MSearchRequest:
		n := int64(cap(r.Vectors)) * vectorHeader
		for _, x := range r.Vectors {
			n += int64(cap(x)) * valueBytes
		}
		n += int64(cap(r.VectorsB64)) * b64Header
		for _, x := range r.VectorsB64 {
			n += int64(cap(x.b))
		}
		return n + ids(r.Filter)
	}
	return 0
}

// decodeJSON is encoding/json with unknown fields, keys in another case
// than their field's, a key given twice and anything after the value
// refused.
func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		switch key, unknown := unknownField(b, v, err); {
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty; JSON expected")
		case unknown:
			return badRequest("unknown field %q", key)
		}
		return badRequest("%s", decodeErrorText(err))
	}
	// Decoder.More is false before a stray '}' or ']': look at the bytes.
	if rest := bytes.TrimLeft(b[d.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return badRequest("invalid JSON: data after the object at byte %d", d.InputOffset())
	}
	// Keys are case-sensitive and given once, as OpenSearch reads them;
	// encoding/json matched "K" to k and kept the last of two.
	// A null where an object or a list is required is refused too, as
	// OpenSearch does: encoding/json took it for the field left out.
	var ke *KeyError
	switch err := checkBody(b, v); {
	case errors.As(err, &ke):
		if ke.Duplicate {
			return errBadRequest("duplicate_field", ke.Error())
		}
		return badRequest("%v", ke)
	case err != nil:
		return badRequest("%v", err)
	}
	// A request's own rules across its fields (vector and vector_b64 both
	// given).
	if c, ok := v.(interface{ checkDecoded() error }); ok {
		return c.checkDecoded()
	}
	return nil
}
