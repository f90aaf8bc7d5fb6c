package s3test

import (
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault decides what happens to the n-th ranged GET (counted from 1) a
// FaultProxy sees: it answers (or breaks) the request itself and returns
// true, or returns false to pass it on.
type Fault func(n int64, w http.ResponseWriter, r *http.Request) bool

// FaultProxy is an HTTP reverse proxy in front of the test server that
// injects faults into ranged GETs (see Set) and can go down and come back
// on the same address (Stop, Start), as a restarted server does. It keeps
// the client's Host header, which the signature covers.
type FaultProxy struct {
	// URL is the endpoint to give clients (http://127.0.0.1:PORT).
	URL string
	// Total counts the requests seen, GETs the ranged GETs. Rounds counts
	// the ranged GETs that arrived with no other in flight: for a client
	// that waits for each query before the next, the round trips it made.
	Total, GETs, Rounds atomic.Int64
	inflight            atomic.Int64
	fault               atomic.Pointer[Fault]
	rp                  *httputil.ReverseProxy
	addr                string
	mu                  sync.Mutex
	srv                 *http.Server // nil while stopped
}

// NewFaultProxy starts a proxy to the test server (skipping the test when
// there is none, as Endpoint does); it stops when the test ends.
func NewFaultProxy(t testing.TB) *FaultProxy {
	t.Helper()
	target, err := url.Parse(Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{rp: &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
	}}}
	p.Clear()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.URL = "http://" + p.addr
	p.serve(ln)
	t.Cleanup(p.Stop)
	return p
}

func (p *FaultProxy) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(p.handle)}
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	go srv.Serve(ln)
}

func (p *FaultProxy) handle(w http.ResponseWriter, r *http.Request) {
	p.Total.Add(1)
	if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
		if p.inflight.Add(1) == 1 {
			p.Rounds.Add(1)
		}
		defer p.inflight.Add(-1)
		n := p.GETs.Add(1)
		if (*p.fault.Load())(n, w, r) {
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// Set makes f decide the fate of every later ranged GET.
func (p *FaultProxy) Set(f Fault) { p.fault.Store(&f) }

// Clear passes every request on.
func (p *FaultProxy) Clear() {
	p.Set(func(int64, http.ResponseWriter, *http.Request) bool { return false })
}

// Stop takes the proxy down: the listener and every connection close, and
// new connections are refused until Start.
func (p *FaultProxy) Stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Start brings a stopped proxy back on the same address.
func (p *FaultProxy) Start(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the old socket may linger a moment
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("s3test: restarting the proxy on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// SlowDown answers 503 SlowDown, S3's throttling answer.
func SlowDown(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
}

// Reset closes the connection with a TCP reset, no answer.
func Reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// Truncated starts a 206 answer of 1000 bytes, sends 10 and resets the
// connection.
func Truncated(w http.ResponseWriter) {
	w.Header().Set("Content-Length", "1000")
	w.Header().Set("Content-Range", "bytes 0-999/1048576")
	w.WriteHeader(http.StatusPartialContent)
	w.Write(make([]byte, 10))
	w.(http.Flusher).Flush()
	Reset(w)
}

// Stall answers nothing for d, or until the client gives up.
func Stall(r *http.Request, d time.Duration) {
	select {
	case <-r.Context().Done():
	case <-time.After(d):
	}
}
