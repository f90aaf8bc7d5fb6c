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
	start := time.Now()
	r := bodyRead{s: s, b: b, cl: cl, buf: b.buf.b[:0], start: start, end: start.Add(s.cfg.RequestTimeout),
		rc: http.NewResponseController(c.Writer)}
	defer func() { b.buf.b = r.buf }()
	// Once the body is in, no read deadline, as net/http leaves it: its
	// background read (watching for the client going away) starts at the
	// body's end, and a deadline passing while the handler runs would fail
	// it and cancel the request (a 499 where a search answers 504).
	defer func() {
		if err == nil {
			_ = r.rc.SetReadDeadline(time.Time{})
		}
	}()
	for step := firstBodyStep; ; step = min(2*step, bodyChunk) {
		if cl >= 0 {
			step = min(step, int(max(cl-int64(len(r.buf)), 0))+1)
		}
		r.setDeadline(step)
		if err := r.grow(step); err != nil {
			return err
		}
		n, err := io.ReadFull(c.Request.Body, r.buf[len(r.buf):len(r.buf)+step])
		r.buf = r.buf[:len(r.buf)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return nil
		case err != nil:
			return r.failed(err)
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

// bodyRead is a body being read: the bytes so far and the deadlines they
// are read under.
type bodyRead struct {
	s          *Server
	b          *body
	cl         int64 // the announced length; −1: none
	buf        []byte
	start, end time.Time // end: the server's own read deadline, about
	rc         *http.ResponseController
	slow       bool // the last read's deadline was min_body_rate's
}

// setDeadline sets the deadline of the next read, of step bytes: the bytes
// so far and this step are due at the body rate, after a first second
// (bodyGrace), and at the request timeout at the latest.
func (r *bodyRead) setDeadline(step int) {
	due := r.start.Add(bodyGrace + time.Duration(float64(len(r.buf)+step)/float64(r.s.limits.MinBodyRate)*float64(time.Second)))
	if r.slow = due.Before(r.end); r.slow {
		_ = r.rc.SetReadDeadline(due)
	} else {
		_ = r.rc.SetReadDeadline(r.end)
	}
}

// grow makes room for step more bytes, charging it to the bodies in
// flight: by doubling, never past the announced length (+1), since the
// buffer is what is charged, and it ends up the body's size.
func (r *bodyRead) grow(step int) error {
	if len(r.buf)+step <= cap(r.buf) {
		return nil
	}
	size := max(2*cap(r.buf), len(r.buf)+step, firstBodyStep)
	if r.cl >= 0 {
		size = min(size, int(r.cl)+1) // still ≥ len+step: step ≤ cl−len+1
	}
	if !r.s.bodyMem.take(int64(size - cap(r.buf))) {
		return errBodiesBusy
	}
	r.b.held += int64(size - cap(r.buf))
	grown := make([]byte, len(r.buf), size)
	copy(grown, r.buf)
	r.buf = grown
	return nil
}

// failed is the answer to a body whose read failed: too large, too slow
// (min_body_rate or the request timeout), or cut off.
func (r *bodyRead) failed(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errTooLarge("body_too_large", fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		if r.slow {
			return errRequestTimeout(fmt.Sprintf("the request body arrived slower than %d bytes a second (min_body_rate; %d bytes in %v)",
				r.s.limits.MinBodyRate, len(r.buf), time.Since(r.start).Round(time.Millisecond)))
		}
		return errRequestTimeout("the request body did not arrive within the request timeout")
	}
	return badRequest("reading the request body: %v", err)
}
