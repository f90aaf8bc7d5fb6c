package s3

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// Defaults of Options.
const (
	DefaultHeadBytes   = 64 << 10
	DefaultTimeout     = 30 * time.Second
	DefaultMaxAttempts = 5
	// GETs in flight per object: an on_disk query's rerank of a shortlist
	// of 100 (its usual size) is one round of GETs only if all go at once.
	DefaultParallel       = 128
	DefaultServerParallel = 256 // GETs in flight per server, all objects
	DefaultBlockSize      = 64 << 10
	// MaxCoalesce caps one GET of a batch: larger runs are split so they
	// still go in parallel.
	MaxCoalesce = 8 << 20
)

// Options tunes Client.Open; zero values take the Client's defaults
// (NewClient), then the defaults above.
type Options struct {
	// Endpoint overrides AWS_ENDPOINT_URL (e.g. a test's proxy); path-style
	// addressing is used whenever an endpoint is set either way.
	Endpoint string
	// HeadBytes is how much of the object the open request fetches (and
	// keeps): the headers a parser reads first.
	HeadBytes int64
	// Timeout bounds one request (answer and body).
	Timeout time.Duration
	// MaxAttempts bounds the tries of one GET (first one included).
	MaxAttempts int
	// Parallel bounds the GETs in flight for the object.
	Parallel int
	// Backoff is the first retry's delay (default 50ms; doubled per retry,
	// at most 2s, with jitter).
	Backoff time.Duration
}

// withDefaults fills o's zero fields from d (a Client's defaults), then
// from the package's.
func (o Options) withDefaults(d Options) Options {
	o.Endpoint = cmp.Or(o.Endpoint, d.Endpoint)
	o.HeadBytes = cmp.Or(o.HeadBytes, d.HeadBytes)
	o.Timeout = cmp.Or(o.Timeout, d.Timeout)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, d.MaxAttempts)
	o.Parallel = cmp.Or(o.Parallel, d.Parallel)
	o.Backoff = cmp.Or(o.Backoff, d.Backoff)
	if o.HeadBytes <= 0 {
		o.HeadBytes = DefaultHeadBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.Backoff <= 0 {
		o.Backoff = 50 * time.Millisecond
	}
	return o
}

// Object is one S3 object pinned to the version (ETag) seen at open.
type Object struct {
	name        string // s3://bucket/key
	bucket, key string
	c           *s3.Client
	o           Options
	size        int64
	etag        string
	head        []byte // the object's first bytes, fetched at open
	life        backendkit.Life
	sem, server chan struct{}
	changed     atomic.Pointer[changedError]

	requests, bytesRequested atomic.Int64 // reads (ReadAtContext calls, batch requests)
	gets, bytesRead          atomic.Int64 // GETs that answered (open's included), bytes they carried
	heads, retries           atomic.Int64
}

// changedError is the sticky error of a replaced object.
type changedError struct{ name, what string }

func (e *changedError) Error() string {
	return partial.ErrFileChanged.Error() + ": " + e.name + ": " + e.what
}

func (e *changedError) Unwrap() error { return partial.ErrFileChanged }

// Open opens the object url names (s3://BUCKET/KEY): one ranged GET of its
// first HeadBytes gives its size and ETag (a HEAD as well only for an
// empty object). A missing object's error wraps fs.ErrNotExist. A nil
// Client opens with one of its own, made for this open: the environment
// read again, no request bound shared with other objects. The open's
// requests give up when ctx ends.
func (c *Client) Open(ctx context.Context, url string, opts Options) (*Object, error) {
	bucket, key, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if c == nil {
		c = NewClient(Options{})
	}
	opts = opts.withDefaults(c.defaults)
	sdk, server, err := c.sdk(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	o := &Object{name: url, bucket: bucket, key: key, c: sdk, o: opts, server: server}
	o.sem = make(chan struct{}, o.o.Parallel)
	if err := o.open(ctx); err != nil {
		return nil, err
	}
	return o, nil
}

// open fetches the head, size and ETag, retrying like any GET.
func (o *Object) open(ctx context.Context) error {
	rng := "bytes=0-" + strconv.FormatInt(o.o.HeadBytes-1, 10)
	var empty bool
	err := o.retry(ctx, methodGET, "GET "+rng, func(ctx context.Context) error {
		out, err := o.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &o.bucket, Key: &o.key, Range: &rng})
		if err != nil {
			if status(err) == 416 { // no byte 0: an empty object
				empty = true
				return nil
			}
			return err
		}
		defer out.Body.Close()
		size, err := totalSize(out)
		if err != nil {
			return err
		}
		n := min(size, o.o.HeadBytes)
		head := make([]byte, n)
		if _, err := io.ReadFull(out.Body, head); err != nil {
			return err
		}
		o.gets.Add(1)
		o.bytesRead.Add(n)
		counters.bytes.Add(n)
		o.size, o.etag, o.head = size, aws.ToString(out.ETag), head
		return nil
	})
	if err == nil && empty {
		err = o.retry(ctx, methodHEAD, "HEAD", func(ctx context.Context) error {
			out, err := o.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &o.bucket, Key: &o.key})
			if err != nil {
				return err
			}
			o.heads.Add(1)
			o.size, o.etag = aws.ToInt64(out.ContentLength), aws.ToString(out.ETag)
			return nil
		})
	}
	if err != nil {
		if s := status(err); s == 404 {
			code := "404"
			var ae smithy.APIError
			if errors.As(err, &ae) {
				code += " " + ae.ErrorCode()
			}
			return fmt.Errorf("s3: %s: no such object or bucket (%s): %w", o.name, code, fs.ErrNotExist)
		}
		return err
	}
	switch {
	case o.etag == "":
		return o.unusable("gave no ETag: a replaced object could not be detected")
	case strings.HasPrefix(o.etag, "W/") || o.etag == "*":
		return o.unusable(fmt.Sprintf("gave the ETag %.40q, which If-Match cannot pin reads to (a weak tag never matches, * matches any version)", o.etag))
	case o.size > MaxObjectSize:
		return o.unusable(fmt.Sprintf("says the object holds %d bytes, more than the %d an index may have", o.size, int64(MaxObjectSize)))
	}
	return nil
}

// MaxObjectSize bounds an object's size as its server reports it: no FAISS
// index comes near, and caches size their tables by it.
const MaxObjectSize = 4 << 40

// unusable is the error of an open whose answer cannot be served from
// (ErrRequestFailed: the store's fault, a server's 502).
func (o *Object) unusable(what string) error {
	return &requestError{msg: fmt.Sprintf("s3: %s: the server %s", o.name, what), user: o.name + ": the object store " + what, err: errors.New(what)}
}

// totalSize reads the object's size from a ranged GET's Content-Range
// ("bytes 0-65535/1048576"), or its length when the server sent it whole.
func totalSize(out *s3.GetObjectOutput) (int64, error) {
	if cr := aws.ToString(out.ContentRange); cr != "" {
		_, total, ok := strings.Cut(cr, "/")
		n, err := strconv.ParseInt(total, 10, 64)
		if !ok || err != nil || n < 0 {
			return 0, fmt.Errorf("unreadable Content-Range %q", cr)
		}
		return n, nil
	}
	if out.ContentLength == nil {
		return 0, errors.New("neither Content-Range nor Content-Length in the answer")
	}
	return *out.ContentLength, nil
}

// Name is the object's s3:// path.
func (o *Object) Name() string { return o.name }

// ETag is the version the object is pinned to.
func (o *Object) ETag() string { return o.etag }

func (o *Object) Size() int64 { return o.size }

func (o *Object) Close() error { return o.life.Close(o.name) }

// ReadAtContext reads p at off (from the head kept at open, or with one
// GET, retried), counting the GET in t (when not nil). It gives up when
// ctx ends: its attempts, waits for a request slot and backoffs all end
// then.
func (o *Object) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	if !o.life.Acquire() {
		return 0, backendkit.Closed(o.name)
	}
	defer o.life.Release()
	o.requests.Add(1)
	o.bytesRequested.Add(int64(len(p)))
	if err := backendkit.CheckRange(o.name, off, int64(len(p)), o.size); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := o.get(ctx, p, off, t); err != nil {
		return 0, err
	}
	return len(p), nil
}

// get fills p with the bytes at off: from the head, or one GET. Under a
// ctx that has ended it fails, even where the head holds the bytes, as
// every read that can block does.
func (o *Object) get(ctx context.Context, p []byte, off int64, t *partial.Tally) error {
	if e := o.changed.Load(); e != nil {
		return e
	}
	if err := partial.Interrupted(ctx); err != nil {
		return o.interrupted(fmt.Sprintf("read of %d bytes at offset %d", len(p), off), err)
	}
	if off+int64(len(p)) <= int64(len(o.head)) {
		copy(p, o.head[off:])
		return nil
	}
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+int64(len(p))-1, 10)
	err := o.retry(ctx, methodGET, "GET "+rng, func(ctx context.Context) error {
		out, err := o.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &o.bucket, Key: &o.key, Range: &rng, IfMatch: &o.etag})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if e := aws.ToString(out.ETag); e != "" && e != o.etag {
			return o.mark("its ETag is " + e + ", not " + o.etag + " as when it was opened")
		}
		if n := aws.ToInt64(out.ContentLength); out.ContentLength != nil && n != int64(len(p)) {
			return fmt.Errorf("the answer carries %d bytes: %w", n, io.ErrUnexpectedEOF)
		}
		if _, err := io.ReadFull(out.Body, p); err != nil {
			return err
		}
		o.gets.Add(1)
		o.bytesRead.Add(int64(len(p)))
		counters.bytes.Add(int64(len(p)))
		return nil
	})
	if t != nil && err == nil {
		t.DeviceReads++
		t.DeviceBytes += int64(len(p))
	}
	return err
}

// The request methods retry counts.
const (
	methodGET = iota
	methodHEAD
)

// retry runs one request until it succeeds, fails for good, has used
// MaxAttempts or three times the timeout, or the caller's ctx ends; each
// attempt has its own timeout within ctx and holds a slot of the object's
// and the server's concurrency bounds. Every attempt is counted in the
// process's metrics (method, GET latency, error kind).
func (o *Object) retry(ctx context.Context, method int, what string, do func(ctx context.Context) error) error {
	if err := partial.Interrupted(ctx); err != nil {
		return o.interrupted(what, err)
	}
	var err error
	// A stalled server (answering nothing) costs each attempt its whole
	// timeout: the attempts together stop at three times it (two stalls
	// and a retry that answers), not MaxAttempts times it.
	deadline := time.Now().Add(3 * o.o.Timeout)
	for attempt := 1; ; attempt++ {
		if err := o.enter(ctx); err != nil {
			return o.interrupted(what, err)
		}
		until := time.Now().Add(o.o.Timeout)
		if deadline.Before(until) {
			until = deadline
		}
		actx, cancel := context.WithDeadline(ctx, until)
		start := time.Now()
		err = do(actx)
		if method == methodGET {
			counters.gets.Add(1)
			observeGET(time.Since(start))
		} else {
			counters.heads.Add(1)
		}
		cancel()
		<-o.server
		<-o.sem
		if err == nil {
			return nil
		}
		if cerr := partial.Interrupted(ctx); cerr != nil {
			return o.interrupted(what, cerr) // the caller's end, not the store's fault
		}
		countError(err)
		if errors.Is(err, partial.ErrFileChanged) {
			return err
		}
		switch s := status(err); {
		case s == 412:
			return o.mark("replaced since it was opened (If-Match " + o.etag + " failed)")
		case s == 404:
			return o.markOr(err, "no longer exists (404) since it was opened")
		case !retryable(err):
			return o.fail(what, attempt, err)
		case attempt >= o.o.MaxAttempts:
			return o.fail(what, attempt, err)
		}
		pause := o.backoff(attempt)
		if !time.Now().Add(pause).Before(deadline) {
			return o.fail(what, attempt, fmt.Errorf("%w (the attempts took three times the %v timeout)", err, o.o.Timeout))
		}
		o.retries.Add(1)
		counters.retries.Add(1)
		if err := sleep(ctx, pause); err != nil {
			return o.interrupted(what, err)
		}
	}
}

// enter takes a slot of the object's and the server's bounds, or gives up
// when ctx ends.
func (o *Object) enter(ctx context.Context) error {
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case o.server <- struct{}{}:
	case <-ctx.Done():
		<-o.sem
		return context.Cause(ctx)
	}
	return nil
}

// sleep waits d, or until ctx ends (its cause then).
func sleep(ctx context.Context, d time.Duration) error {
	if ctx.Done() == nil {
		time.Sleep(d)
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// interrupted is the error of a request its caller gave up (a query's
// deadline, a client gone, a shutdown): it wraps cause and not
// ErrRequestFailed, as the store is not known to have failed.
func (o *Object) interrupted(what string, cause error) error {
	return fmt.Errorf("s3: %s: %s given up: %w", o.name, what, cause)
}

// markOr marks a 404 during reads as a change; at open (no ETag yet) it is
// the error itself.
func (o *Object) markOr(err error, what string) error {
	if o.etag == "" {
		return err
	}
	return o.mark(what)
}

// backoff is the delay before retry number attempt: exponential, capped,
// with jitter (half fixed, half random) so clients do not retry in step.
func (o *Object) backoff(attempt int) time.Duration {
	d := min(o.o.Backoff<<(attempt-1), 2*time.Second)
	return d/2 + rand.N(d/2+1)
}

// mark records the change (the first one seen stays) and returns the
// sticky error.
func (o *Object) mark(what string) error {
	o.changed.CompareAndSwap(nil, &changedError{name: o.name, what: what})
	return o.changed.Load()
}

// ErrRequestFailed matches (errors.Is) the error of a request that failed
// for good: not answered within the attempts, or refused (403, …). A
// server answers such a failure 502 rather than blaming the caller.
var ErrRequestFailed = errors.New("s3: request failed")

// requestError is a request that failed for good; it matches
// ErrRequestFailed and the request's own error.
type requestError struct {
	msg  string
	user string // the same for users: no package names, no SDK text
	err  error
}

// Reason is, for an error of a request that failed for good, a sentence
// for users naming the object and what happened, without the SDK's text
// (which the error itself keeps, for logs); ok is false for other errors.
func Reason(err error) (reason string, ok bool) {
	var re *requestError
	if !errors.As(err, &re) || re.user == "" {
		return "", false
	}
	return re.user, true
}

func (e *requestError) Error() string { return e.msg }
func (e *requestError) Unwrap() []error {
	return []error{ErrRequestFailed, partial.ErrStoreFailed, e.err}
}

// fail is the error of a request that failed for good: the object, the
// request, the attempts and the server's status or the connection's error
// (never a credential: those travel only in the signature).
func (o *Object) fail(what string, attempts int, err error) error {
	return &requestError{msg: fmt.Sprintf("s3: %s: %s failed after %d attempt(s): %v", o.name, what, attempts, err),
		user: o.name + ": " + o.failure(attempts, err), err: err}
}

// failure says for users what became of a request's attempts.
func (o *Object) failure(attempts int, err error) string {
	n := fmt.Sprintf("%d attempts", attempts)
	if attempts == 1 {
		n = "1 attempt"
	}
	var ae smithy.APIError
	var ne net.Error
	s := status(err)
	code := http.StatusText(s)
	if errors.As(err, &ae) && ae.ErrorCode() != "" {
		code = ae.ErrorCode() // AccessDenied, SlowDown, …
	}
	switch {
	case s >= 500:
		return fmt.Sprintf("the object store answered %d %s (%s)", s, code, n)
	case s != 0:
		return fmt.Sprintf("the object store refused the request: %d %s (%s)", s, code, n)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("the object store did not answer within %v (%s)", o.o.Timeout, n)
	}
	return fmt.Sprintf("the object store could not be reached (%s)", n)
}

// status is the HTTP status of a request's error, 0 when none came back.
func status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// retryable: 5xx, throttling and request timeouts, and errors with no
// answer at all (connection refused or reset, a truncated body, a timeout).
func retryable(err error) bool {
	s := status(err)
	switch {
	case s >= 500 || s == 429 || s == 408:
		return true
	case s != 0:
		var ae smithy.APIError
		if errors.As(err, &ae) {
			switch ae.ErrorCode() {
			case "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed":
				return true
			}
		}
		return false
	}
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) || strings.Contains(err.Error(), "connection reset")
}

// ReadBatch (partial.BatchReader) sorts the requests by offset, coalesces
// adjacent and overlapping ones into single GETs of at most MaxCoalesce
// bytes, and sends those GETs in parallel (bounded by Options.Parallel).
// Each request carries its own error; the first is returned. The GETs give
// up when ctx ends.
func (o *Object) ReadBatch(ctx context.Context, reqs []partial.ReadReq) error {
	if !o.life.Acquire() {
		return backendkit.Closed(o.name)
	}
	defer o.life.Release()
	idx := make([]int, 0, len(reqs))
	for i := range reqs {
		q := &reqs[i]
		o.requests.Add(1)
		o.bytesRequested.Add(int64(len(q.Buf)))
		if q.Err = backendkit.CheckRange(o.name, q.Off, int64(len(q.Buf)), o.size); q.Err == nil && len(q.Buf) > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(reqs[a].Off, reqs[b].Off) })
	var wg sync.WaitGroup
	for len(idx) > 0 {
		start, end := reqs[idx[0]].Off, reqs[idx[0]].Off+int64(len(reqs[idx[0]].Buf))
		n := 1
		for ; n < len(idx); n++ {
			q := &reqs[idx[n]]
			qe := q.Off + int64(len(q.Buf))
			if q.Off > end || max(end, qe)-start > MaxCoalesce {
				break
			}
			end = max(end, qe)
		}
		group := idx[:n]
		idx = idx[n:]
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.readGroup(ctx, reqs, group, start, end)
		}()
	}
	wg.Wait()
	for i := range reqs {
		if reqs[i].Err != nil {
			return reqs[i].Err
		}
	}
	return nil
}

// readGroup serves the requests group (sorted, covering [start, end)) with
// one GET, counted in the first request's tally.
func (o *Object) readGroup(ctx context.Context, reqs []partial.ReadReq, group []int, start, end int64) {
	first := &reqs[group[0]]
	if len(group) == 1 {
		first.Err = o.get(ctx, first.Buf, first.Off, &first.IO)
		return
	}
	buf := make([]byte, end-start)
	err := o.get(ctx, buf, start, &first.IO)
	for _, i := range group {
		q := &reqs[i]
		if q.Err = err; err == nil {
			copy(q.Buf, buf[q.Off-start:])
		}
	}
}

// CheckFD (partial.FileChecker) is the per-query check: every GET is pinned
// to the ETag seen at open, so the bytes a query read are of that version
// unless a GET saw the object replaced, which this reports (sticky). No
// request, no allocation.
func (o *Object) CheckFD() error {
	if e := o.changed.Load(); e != nil {
		return e
	}
	return nil
}

// CheckFile (partial.FileChecker) asks the server (one HEAD) whether the
// object is still the version opened; for watchers and status requests.
// The HEAD gives up when ctx ends.
func (o *Object) CheckFile(ctx context.Context) error {
	if e := o.changed.Load(); e != nil {
		return e
	}
	if !o.life.Acquire() {
		return backendkit.Closed(o.name)
	}
	defer o.life.Release()
	var etag string
	var size int64
	err := o.retry(ctx, methodHEAD, "HEAD", func(ctx context.Context) error {
		out, err := o.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &o.bucket, Key: &o.key})
		if err != nil {
			return err
		}
		o.heads.Add(1)
		etag, size = aws.ToString(out.ETag), aws.ToInt64(out.ContentLength)
		return nil
	})
	switch {
	case err != nil:
		return err
	case etag != o.etag:
		return o.mark("its ETag is " + etag + ", not " + o.etag + " as when it was opened")
	case size != o.size:
		return o.mark(fmt.Sprintf("size %d -> %d since it was opened", o.size, size))
	}
	return nil
}

// Stats (partial.StatsReporter): Requests and BytesRequested count
// ReadAtContext calls and batch requests, ReadCalls and BytesRead the GETs that answered
// (the open's included) and their bytes; ResidentBytes is the kept head.
func (o *Object) Stats() partial.Stats {
	return partial.Stats{
		Requests: o.requests.Load(), BytesRequested: o.bytesRequested.Load(),
		ReadCalls: o.gets.Load(), BytesRead: o.bytesRead.Load(), ResidentBytes: int64(len(o.head)),
	}
}

// RequestStats counts the object's HTTP requests that answered: GETs and
// HEADs, and the retries made.
type RequestStats struct {
	GETs    int64 `json:"gets"`
	HEADs   int64 `json:"heads"`
	Retries int64 `json:"retries"`
}

// Requests returns the object's request counts.
func (o *Object) Requests() RequestStats {
	return RequestStats{GETs: o.gets.Load(), HEADs: o.heads.Load(), Retries: o.retries.Load()}
}
