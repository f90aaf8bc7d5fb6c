package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

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
// not a whole chunk per connection, so connections that each send a byte
// of a small body cannot hold the whole budget and shed every other
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
	if !s.takeBuf(b, cl) {
		return errBodiesBusy
	}
	buf := b.buf.b[:0]
	defer func() { b.buf.b = buf }()
	start, rc := time.Now(), http.NewResponseController(c.Writer)
	r := bodyRead{s: s, cl: cl, start: start, end: start.Add(s.cfg.RequestTimeout)}
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
		_ = rc.SetReadDeadline(r.deadline(len(buf), step))
		var gerr error
		if buf, gerr = r.grow(b, buf, step); gerr != nil {
			return gerr
		}
		n, err := io.ReadFull(c.Request.Body, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return nil
		case err != nil:
			return r.failed(err, len(buf))
		}
	}
}

// takeBuf gives b a buffer for a body of cl bytes (−1: not announced),
// charged whole to the bodies in flight; false when they have no room for
// it. A pooled buffer is taken only when it is at most twice what this
// body needs (a slow client must not hold a large buffer for its few
// bytes).
func (s *Server) takeBuf(b *body, cl int64) bool {
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
		return false
	}
	b.held = int64(cap(b.buf.b))
	return true
}

// bodyRead is the deadlines a body is read under. It holds no pointer to
// the request's body or its buffer: escape analysis would then have the
// request's hold, which the body is part of, allocated on the heap.
type bodyRead struct {
	s          *Server
	cl         int64     // the announced length; −1: none
	start, end time.Time // end: the server's own read deadline, about
	slow       bool      // the last read's deadline was min_body_rate's
}

// deadline is the deadline of the next read, of step bytes after the have
// read: the bytes so far and this step are due at the body rate, after a
// first second (bodyGrace), and at the request timeout at the latest.
func (r *bodyRead) deadline(have, step int) time.Time {
	due := r.start.Add(bodyGrace + time.Duration(float64(have+step)/float64(r.s.limits.MinBodyRate)*float64(time.Second)))
	if r.slow = due.Before(r.end); r.slow {
		return due
	}
	return r.end
}

// grow makes room in buf, b's, for step more bytes, charging it to b and
// the bodies in flight: by doubling, never past the announced length
// (+1), since the buffer is what is charged, and it ends up the body's
// size.
func (r *bodyRead) grow(b *body, buf []byte, step int) ([]byte, error) {
	if len(buf)+step <= cap(buf) {
		return buf, nil
	}
	size := max(2*cap(buf), len(buf)+step, firstBodyStep)
	if r.cl >= 0 {
		size = min(size, int(r.cl)+1) // still ≥ len+step: step ≤ cl−len+1
	}
	if !r.s.bodyMem.take(int64(size - cap(buf))) {
		return buf, errBodiesBusy
	}
	b.held += int64(size - cap(buf))
	grown := make([]byte, len(buf), size)
	copy(grown, buf)
	return grown, nil
}

// failed is the answer to a body whose read failed after have bytes: too
// large, too slow (min_body_rate or the request timeout), or cut off.
func (r *bodyRead) failed(err error, have int) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errTooLarge("body_too_large", fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		if r.slow {
			return errRequestTimeout(fmt.Sprintf("the request body arrived slower than %d bytes a second (min_body_rate; %d bytes in %v)",
				r.s.limits.MinBodyRate, have, time.Since(r.start).Round(time.Millisecond)))
		}
		return errRequestTimeout("the request body did not arrive within the request timeout")
	}
	return badRequest("reading the request body: %v", err)
}
