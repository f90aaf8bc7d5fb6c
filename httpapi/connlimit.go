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
// while it waits the slots held between requests are given up to it:
//   - the keep-alive connection idle the longest is closed;
//   - every response carries Connection: close (closeWhenWaiting), so a
//     busy connection leaves after its current request.
//
// Without that, clients keeping connections open held every slot until the
// 2 min idle timeout, and a liveness probe (/_health) waited as long. Only
// one connection at a time waits here; the others stay in the kernel's
// accept queue.
type connLimiter struct {
	net.Listener
	slots   chan struct{}
	waiting atomic.Bool
	idled   chan struct{} // a connection went idle (buffered 1)
	done    chan struct{} // closed by Close
	closed  sync.Once

	mu   sync.Mutex
	idle map[*limitedConn]time.Time // keep-alive connections between requests, and since when
}

func newConnLimiter(l net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: l, slots: make(chan struct{}, max), idled: make(chan struct{}, 1),
		done: make(chan struct{}), idle: make(map[*limitedConn]time.Time)}
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
	l.waiting.Store(true)
	defer l.waiting.Store(false)
	for {
		l.closeIdlest()
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, l: l}, nil
		case <-l.idled:
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

// closeIdlest closes the keep-alive connection idle the longest, if any.
// A request arriving on it at that instant fails as at the idle timeout.
func (l *connLimiter) closeIdlest() {
	l.mu.Lock()
	var oldest *limitedConn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}

// connState is the http.Server's ConnState hook: it tracks which
// connections sit idle between requests.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	if st == http.StateIdle {
		l.idle[lc] = time.Now()
	} else {
		delete(l.idle, lc)
	}
	l.mu.Unlock()
	if st == http.StateIdle {
		select {
		case l.idled <- struct{}{}:
		default:
		}
	}
}

// closeWhenWaiting has h's responses close their connection while a new
// connection waits for a slot.
func (l *connLimiter) closeWhenWaiting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.waiting.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
