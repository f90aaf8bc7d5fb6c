package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"
)

// bodies recycles request body buffers.
var bodies = sync.Pool{New: func() any { return new(bodyBuf) }}

// bodyBuf is a pooled request body buffer.
type bodyBuf struct{ b []byte }

// maxPooledBody is the largest body buffer kept for reuse: a huge _msearch
// body's is left to the collector.
const maxPooledBody = 1 << 20

// body is a request's body while it is charged to the bodies in flight,
// then what decoding it made (the vectors); Server.release gives both back.
type body struct {
	buf  *bodyBuf
	held int64
}

// release gives b's bytes back to the budget and its buffer to the pool.
func (s *Server) release(b *body) {
	s.bodyMem.give(b.held)
	b.held = 0
	s.dropBuf(b)
}

// dropBuf returns b's buffer to the pool (or to the collector).
func (s *Server) dropBuf(b *body) {
	if b.buf != nil && cap(b.buf.b) <= maxPooledBody {
		bodies.Put(b.buf)
	}
	b.buf = nil
}

// Request bodies are read and charged to the bodies-in-flight budget in
// steps: the first of firstBodyStep bytes, each next one twice the last up
// to bodyChunk, none past the announced length (+1, to see its end). A
// slow client is charged about what it has sent (a step ahead at most),
// not a whole chunk per connection: 1,025 connections that each sent one
// byte of a 100-byte body used to hold all 64 MiB and shed every other
// request.
const (
	firstBodyStep = 4 << 10
	bodyChunk     = 64 << 10
)

// errBodiesBusy sheds a request whose body would take the bodies being
// read past max_bodies_in_flight.
var errBodiesBusy = errTooMany("too_many_requests", "too many request bodies being read at once; retry later")

// bodyGrace is how long a request body may take before min_body_rate
// applies to it.
const bodyGrace = time.Second

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
				*r = SearchRequest{Vector: r.Vector[:0]} // forget what the fast parser filled in
				err = decodeJSON(raw, v)
			}
		case *MSearchRequest:
			if !msearchFast(raw, r) {
				*r = MSearchRequest{}
				err = decodeJSON(raw, v)
			}
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
// value per ',' or '[' at most (8 bytes each). Decoding a body of tiny
// vectors ("[0],") made 10 to 15 times its size before anything counted
// it (an outside attack had a 512 MiB server killed by one 16 MiB
// _msearch); an _msearch with more arrays than max_msearch_vectors (and
// its own and a filter's) allow is refused before it is decoded. The body
// (b, read) stays while it decodes: a request whose body and bound together
// exceed max_bodies_in_flight could never be decoded, even alone, and is a
// 413, not a 429 to retry for ever; one that fits only without its buffer's
// slack (a chunked body's buffer grows by doubling) is moved to a buffer of
// its size first.
func (s *Server) chargeDecode(v any, b *body) (int64, error) {
	raw := b.buf.b
	_, multi := v.(*MSearchRequest)
	if _, single := v.(*SearchRequest); !single && !multi {
		return 0, nil
	}
	arrays := int64(bytes.Count(raw, []byte{'['}))
	if multi && arrays > int64(s.limits.MaxMsearchVectors)+2 {
		return 0, badRequest("_msearch has more than %d vectors (max_msearch_vectors): the body holds %d arrays", s.limits.MaxMsearchVectors, arrays)
	}
	bound := arrays*vectorHeader + (arrays+int64(bytes.Count(raw, []byte{','})))*valueBytes
	size := int64(len(raw))
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
// (a filter's id takes as much).
const (
	vectorHeader = int64(unsafe.Sizeof(Vector{}))
	valueBytes   = int64(unsafe.Sizeof(Vector{}[0]))
)

// decodedBytes is what a decoded request body holds beyond its struct:
// its vectors and filter ids.
func decodedBytes(v any) int64 {
	ids := func(f *IDFilter) int64 {
		if f == nil {
			return 0
		}
		return int64(cap(f.IDs)) * int64(unsafe.Sizeof(f.IDs[0]))
	}
	switch r := v.(type) {
	case *SearchRequest:
		return int64(cap(r.Vector))*valueBytes + ids(r.Filter)
	case *MSearchRequest:
		n := int64(cap(r.Vectors)) * vectorHeader
		for _, x := range r.Vectors {
			n += int64(cap(x)) * valueBytes
		}
		return n + ids(r.Filter)
	}
	return 0
}

// read reads c's body into b, charging the buffer's size to the bodies in
// flight as it grows. A body refused before its end (too large, too many
// in flight, too slow) closes the connection after the answer, as
// limitBody says why.
func (s *Server) read(c *gin.Context, b *body) (err error) {
	defer func() {
		if err != nil {
			c.Header("Connection", "close")
		}
	}()
	cl := c.Request.ContentLength // −1: not announced (chunked)
	if cl > 0 && strings.EqualFold(c.GetHeader("Expect"), "100-continue") && !s.bodyMem.fits(cl) {
		// The client waits for a go-ahead before sending: shed it now, and
		// it sends nothing, rather than midway, when the connection must
		// close on a body still arriving (a reset, not an answer, for a
		// client busy sending).
		return errBodiesBusy
	}
	// A pooled buffer is charged whole, so one is taken only when it is at
	// most twice what this body needs (a slow client must not hold a large
	// buffer for its few bytes).
	b.buf = bodies.Get().(*bodyBuf)
	fit := int64(firstBodyStep) // a body of unknown length
	if cl >= 0 {
		fit = cl + 1
	}
	if int64(cap(b.buf.b)) > 2*fit {
		bodies.Put(b.buf)
		b.buf = new(bodyBuf)
	}
	if !s.bodyMem.take(int64(cap(b.buf.b))) {
		return errBodiesBusy
	}
	b.held = int64(cap(b.buf.b))
	buf := b.buf.b[:0]
	defer func() { b.buf.b = buf }()
	start, rc := time.Now(), http.NewResponseController(c.Writer)
	end := start.Add(s.cfg.RequestTimeout) // the server's own read deadline, about
	var slow bool                          // the last read's deadline was min_body_rate's
	// Once the body is in, no read deadline, as net/http leaves it: its
	// background read (watching for the client going away) starts at the
	// body's end, and a deadline passing while the handler runs would fail
	// it and cancel the request (a 499 where a search answers 504).
	defer func() {
		if err == nil {
			_ = rc.SetReadDeadline(time.Time{})
		}
	}()
	for step := firstBodyStep; ; step = min(2*step, bodyChunk) {
		if cl >= 0 {
			step = min(step, int(max(cl-int64(len(buf)), 0))+1)
		}
		// The bytes so far and this step are due at the body rate, after
		// a first second (bodyGrace).
		due := start.Add(bodyGrace + time.Duration(float64(len(buf)+step)/float64(s.limits.MinBodyRate)*float64(time.Second)))
		if slow = due.Before(end); slow {
			_ = rc.SetReadDeadline(due)
		} else {
			_ = rc.SetReadDeadline(end)
		}
		if len(buf)+step > cap(buf) {
			// Grow by doubling, never past the announced length (+1): the
			// buffer is what is charged, and it ends up the body's size.
			size := max(2*cap(buf), len(buf)+step, firstBodyStep)
			if cl >= 0 {
				size = min(size, int(cl)+1) // still ≥ len+step: step ≤ cl−len+1
			}
			if !s.bodyMem.take(int64(size - cap(buf))) {
				return errBodiesBusy
			}
			b.held += int64(size - cap(buf))
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			buf = grown
		}
		n, err := io.ReadFull(c.Request.Body, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return nil
		case err != nil:
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return errTooLarge("body_too_large", fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				if slow {
					return errRequestTimeout(fmt.Sprintf("the request body arrived slower than %d bytes a second (min_body_rate; %d bytes in %v)",
						s.limits.MinBodyRate, len(buf), time.Since(start).Round(time.Millisecond)))
				}
				return errRequestTimeout("the request body did not arrive within the request timeout")
			}
			return badRequest("reading the request body: %v", err)
		}
	}
}

// decodeJSON is encoding/json with unknown fields, keys in another case
// than their field's, a key given twice and anything after the value
// refused.
func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		switch {
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty; JSON expected")
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
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
	return nil
}
