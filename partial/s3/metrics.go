package s3

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/smithy-go"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// Error kinds: what a failed request attempt met, for the process's
// metrics (ErrorKinds lists them all, in a fixed order).
const (
	KindNotFound   = "not_found"  // 404: no such object or bucket
	KindChanged    = "changed"    // 412 (If-Match failed) or another ETag: the object was replaced
	KindThrottled  = "throttled"  // 429, 503 SlowDown and the other throttling codes
	KindServer     = "5xx"        // another 5xx answer
	KindClient     = "4xx"        // another 4xx answer (403 AccessDenied, …)
	KindTimeout    = "timeout"    // no answer or body within Options.Timeout
	KindConnection = "connection" // refused, reset, or a body cut short
	KindOther      = "other"
)

var errorKinds = [...]string{KindNotFound, KindChanged, KindThrottled, KindServer, KindClient, KindTimeout, KindConnection, KindOther}

// ErrorKinds lists the error kinds of Metrics.Errors.
var ErrorKinds = errorKinds[:]

// latencyBounds are the upper bounds (seconds) of the GET latency
// histogram's buckets: fixed, so recording a GET is a few atomic adds.
var latencyBounds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// boundsNanos is latencyBounds in nanoseconds.
var boundsNanos = func() (b [len(latencyBounds)]int64) {
	for i, s := range latencyBounds {
		b[i] = int64(s * 1e9)
	}
	return b
}()

// counters are the process's request counters, summed over every Object:
// one server's S3 traffic.
var counters struct {
	gets, heads  atomic.Int64
	bytes        atomic.Int64
	retries      atomic.Int64
	errs         [len(errorKinds)]atomic.Int64
	latency      [len(latencyBounds) + 1]atomic.Int64 // the last: above every bound
	latencyNanos atomic.Int64
	latencyCount atomic.Int64
}

// Metrics is a snapshot of every request the process's Objects made.
type Metrics struct {
	// GETs and HEADs count the request attempts sent (retries included).
	GETs, HEADs int64
	// ReceivedBytes counts the body bytes of the GETs that succeeded.
	ReceivedBytes int64
	// Retries counts the attempts made again after a retryable failure.
	Retries int64
	// Errors counts the failed attempts by kind (every one of ErrorKinds).
	Errors map[string]int64
	// GETLatency is the latency of every GET attempt, from sending it to
	// its body read (or its failure), waits for a concurrency slot
	// excluded: cumulative counts per bound (1 ms to 30 s), the count and
	// the sum in seconds.
	GETLatency Histogram
}

// Histogram is a cumulative histogram over fixed bounds.
type Histogram struct {
	Bounds     []float64
	Cumulative []uint64 // observations ≤ Bounds[i]
	Count      uint64
	Sum        float64 // seconds
}

// ReadMetrics returns the process's S3 request counters. They never hold a
// credential: counts, bytes and times only.
func ReadMetrics() Metrics {
	m := Metrics{GETs: counters.gets.Load(), HEADs: counters.heads.Load(), ReceivedBytes: counters.bytes.Load(),
		Retries: counters.retries.Load(), Errors: make(map[string]int64, len(ErrorKinds))}
	for i, k := range errorKinds {
		m.Errors[k] = counters.errs[i].Load()
	}
	h := Histogram{Bounds: slices.Clone(latencyBounds[:]), Cumulative: make([]uint64, len(latencyBounds))}
	var run uint64
	for i := range latencyBounds {
		run += uint64(counters.latency[i].Load())
		h.Cumulative[i] = run
	}
	h.Count = uint64(counters.latencyCount.Load())
	h.Sum = float64(counters.latencyNanos.Load()) / 1e9
	m.GETLatency = h
	return m
}

// observeGET records one GET attempt's latency.
func observeGET(d time.Duration) {
	n := int64(d)
	i := 0
	for i < len(boundsNanos) && n > boundsNanos[i] {
		i++
	}
	counters.latency[i].Add(1)
	counters.latencyNanos.Add(n)
	counters.latencyCount.Add(1)
}

// countError records a failed attempt by kind.
func countError(err error) {
	counters.errs[slices.Index(errorKinds[:], errorKind(err))].Add(1)
}

// errorKind classifies a failed attempt's error.
func errorKind(err error) string {
	if errors.Is(err, partial.ErrFileChanged) {
		return KindChanged
	}
	switch s := status(err); {
	case s == 404:
		return KindNotFound
	case s == 412:
		return KindChanged
	case s == 429 || throttleCode(err):
		return KindThrottled
	case s >= 500:
		return KindServer
	case s >= 400:
		return KindClient
	case s != 0:
		return KindOther
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE), errors.As(err, &ne):
		return KindConnection
	}
	return KindOther
}

// throttleCodes are the error codes S3 and compatible servers throttle
// with (503 SlowDown, …).
var throttleCodes = []string{"SlowDown", "Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequests"}

func throttleCode(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && slices.Contains(throttleCodes, ae.ErrorCode())
}
