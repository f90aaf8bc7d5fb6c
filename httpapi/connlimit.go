package httpapi

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter keeps at most max client connections open (max_connections).
// A connection accepted past the limit waits, unserved, for a slot, and
// while it waits the slots held without a request are given up to it:
//   - a connection quiet for quietBeforeClose is closed, the one quiet the
//     longest first: a keep-alive connection idle between requests, or a
//     new one whose request headers have not all come (a client that
//     connects and sends nothing, or sends headers a byte at a time, held
//     a slot for the 10 s header timeout);
//   - one response carries Connection: close (closeForWaiting), so a busy
//     connection leaves after its current request; again every tick while
//     the connection still waits.
//
// Without that, clients keeping connections open held every slot until the
// 2 min idle timeout, and a liveness probe (/_health) waited as long. A
// connection idle only between a client's back-to-back requests is not
// closed under it (that request would fail); it is asked to close instead.
// Only one connection at a time waits here; the others stay in the
// kernel's accept queue.
type connLimiter struct {
	net.Listener
	slots  chan struct{}
	owed   atomic.Int32  // 1: the next response closes its connection for a waiting one
	done   chan struct{} // closed by Close
	closed sync.Once

	mu    sync.Mutex
	quiet map[*limitedConn]time.Time // connections without a request in progress, and since when
}

// quietBeforeClose is how long a connection must have been without a
// request to be closed for a waiting one; the waiting one looks twice as
// often. A client's headers reach the server with its connection, well
// within it.
const quietBeforeClose = 100 * time.Millisecond

func newConnLimiter(l net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: l, slots: make(chan struct{}, max), done: make(chan struct{}),
		quiet: make(map[*limitedConn]time.Time)}
}

// limitedConn gives its slot back once, at its first Close.
type limitedConn struct {
	net.Conn
	release sync.Once
	l       *connLimiter
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release.Do(func() { <-c.l.slots })
	return err
}

func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
		return &limitedConn{Conn: c, l: l}, nil
	default:
	}
	tick := time.NewTicker(quietBeforeClose / 2)
	defer tick.Stop()
	defer l.owed.Store(0)
	for {
		l.owed.Store(1)
		l.closeQuietest(time.Now().Add(-quietBeforeClose))
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, l: l}, nil
		case <-tick.C:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

func (l *connLimiter) Close() error {
	l.closed.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// closeQuietest closes the connection quiet the longest, if it has been
// quiet since before. A request arriving on it at that instant fails as
// at the idle timeout.
func (l *connLimiter) closeQuietest(before time.Time) {
	l.mu.Lock()
	var oldest *limitedConn
	since := before
	for c, t := range l.quiet {
		if t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.quiet, oldest)
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}

// connState is the http.Server's ConnState hook: it tracks which
// connections are quiet: new (no request yet) or idle between requests.
// (A request's state turns active once its headers are read.)
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	if st == http.StateNew || st == http.StateIdle {
		l.quiet[lc] = time.Now()
	} else {
		delete(l.quiet, lc)
	}
	l.mu.Unlock()
}

// closeForWaiting has one of h's responses close its connection while a
// new connection waits for a slot.
func (l *connLimiter) closeForWaiting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.owed.Load() != 0 && l.owed.CompareAndSwap(1, 0) {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
