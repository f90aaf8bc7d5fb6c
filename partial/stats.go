package partial

import "sync/atomic"

// counters is the accounting every backend embeds; atomic adds keep it
// cheap enough to leave on.
type counters struct {
	requests, bytesRequested, readCalls, bytesRead atomic.Int64
	hits, misses                                   atomic.Int64
}

func (c *counters) request(n int) {
	c.requests.Add(1)
	c.bytesRequested.Add(int64(n))
}

func (c *counters) osRead(n int) {
	c.readCalls.Add(1)
	c.bytesRead.Add(int64(n))
}

func (c *counters) snapshot() Stats {
	return Stats{
		Requests: c.requests.Load(), BytesRequested: c.bytesRequested.Load(),
		ReadCalls: c.readCalls.Load(), BytesRead: c.bytesRead.Load(),
		CacheHits: c.hits.Load(), CacheMisses: c.misses.Load(),
	}
}
