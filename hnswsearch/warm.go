package hnswsearch

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/readahead"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// warm pulls the graph and then the vectors into memory ahead of queries
// through the backend's partial.Warmer: on a zero-copy backend (mmap) both
// sections whole; otherwise into the block cache, at most maxBytes (e.g. the
// cache's budget; ≤ 0 for no limit), skipping what is pinned, and the
// vectors the vector cache will hold instead. Then the vector cache. It
// gives up when ctx ends.
func (x *Index) warm(ctx context.Context, maxBytes int64) error {
	// What to warm, in order: the lists (index file), then the vectors
	// (the index file, or a separate vector file with its own backend).
	type part struct {
		w   partial.Warmer
		sec faissfmt.Section
	}
	w, _ := x.st.(partial.Warmer)
	vw, _ := x.vst.(partial.Warmer)
	parts := []part{{w, x.nb}, {vw, x.codes}}
	if x.opts.Guide != nil { // the search reads no vector
		parts = parts[:1]
	}
	if x.viewer == nil {
		if x.PinnedBytes() > 0 {
			parts = parts[1:]
		}
		if x.vc != nil && len(parts) > 0 && parts[len(parts)-1].sec == x.codes {
			parts = parts[:len(parts)-1]
		}
		if x.blocks == nil { // no block cache: nothing would keep the bytes
			parts = nil
		}
	} else {
		maxBytes = 0
	}
	if maxBytes <= 0 {
		maxBytes = math.MaxInt64
	}
	for _, p := range parts {
		if maxBytes == 0 {
			break
		}
		if p.w == nil {
			continue
		}
		n := min(p.sec.Len, maxBytes)
		if err := p.w.Warm(ctx, p.sec.Offset, n); err != nil {
			return fmt.Errorf("warming %s: %w", p.sec.Name, err)
		}
		maxBytes -= n
	}
	if x.vc != nil && x.opts.Guide == nil { // a guide's cache holds what reranks read
		return x.warmVectorCache(ctx)
	}
	return nil
}

// warmVectorCache fills the vector cache with the vectors every query's
// descent may touch: the nodes above level 0, top level first, up to the
// cache's size, read in parallel batches where the backend serves them.
func (x *Index) warmVectorCache(ctx context.Context) error {
	slots := x.vc.Stats().Slots
	var nodes []int32
	for v := int32(0); v < x.n; v++ {
		if x.h.NumLevels(v) > 1 {
			nodes = append(nodes, v)
		}
	}
	slices.SortStableFunc(nodes, func(a, b int32) int { return x.h.NumLevels(b) - x.h.NumLevels(a) })
	nodes = nodes[:min(len(nodes), slots)]
	cs := x.codeSize
	const chunk = 256
	buf := make([]byte, chunk*cs)
	reqs := make([]partial.ReadReq, 0, chunk)
	batch, _ := x.vst.(partial.BatchReader)
	for len(nodes) > 0 {
		part := nodes[:min(chunk, len(nodes))]
		nodes = nodes[len(part):]
		reqs = reqs[:0]
		for i, v := range part {
			reqs = append(reqs, partial.ReadReq{Off: x.vectorOffset(v), Buf: buf[i*cs : (i+1)*cs]})
		}
		if batch != nil {
			if err := batch.ReadBatch(ctx, reqs); err != nil {
				return fmt.Errorf("warming the vector cache: %w", err)
			}
		} else {
			for _, q := range reqs {
				if _, err := x.vst.ReadAtContext(ctx, q.Buf, q.Off, nil); err != nil {
					return fmt.Errorf("warming the vector cache: %w", err)
				}
			}
		}
		for i, v := range part {
			x.vc.Put(v, reqs[i].Buf)
		}
	}
	return nil
}

// streamNeighbors calls fn(node, record) for every node's neighbor record
// (all its levels), reading the section sequentially in steps of
// x.streamChunk() bytes from aligned chunks read ahead in parallel
// (streamAhead of them): at the device's streaming rate through O_DIRECT,
// which one unaligned read at a time falls far short of. The reads give
// up when ctx ends.
func (x *Index) streamNeighbors(ctx context.Context, fn func(v int32, rec []byte)) error {
	return x.streamNeighborsBy(ctx, x.streamChunk(), fn)
}

// streamNeighborsBy is streamNeighbors in steps of chunk bytes (or a
// record's length, when longer).
func (x *Index) streamNeighborsBy(ctx context.Context, chunk int64, fn func(v int32, rec []byte)) error {
	ra := readahead.New(partial.ReaderAt(ctx, x.st), x.nb.Offset+x.nb.Len, int(x.streamChunk()), streamAhead)
	defer ra.Close()
	buf := make([]byte, 0, chunk)
	var base int64 // section byte offset of buf[0]
	for v := int32(0); v < x.n; v++ {
		lo, hi := x.h.NodeOffset(int64(v))*4, x.h.NodeOffset(int64(v)+1)*4
		if end := base + int64(len(buf)); hi > end {
			// Keep [lo, end) and read on from end: reads stay contiguous,
			// so the read-ahead goes on.
			keep := copy(buf[:cap(buf)], buf[lo-base:])
			n := min(max(chunk, hi-lo), x.nb.Len-lo)
			if int64(cap(buf)) < n {
				buf = append(make([]byte, 0, n), buf[:keep]...)
			}
			buf = buf[:n]
			if _, err := ra.ReadAt(buf[keep:], x.nb.Offset+end); err != nil {
				return fmt.Errorf("reading the neighbor lists: %w", err)
			}
			base = lo
		}
		fn(v, buf[lo-base:hi-base])
	}
	return nil
}

// streamChunk and streamAhead shape streamNeighbors' read-ahead: chunks of
// up to maxStreamChunk, three in flight past the one being read, while the
// step being handed out holds one more (5 MiB in all at 1 MiB chunks).
// Larger chunks would not fit beside a guide and lists that fill a tight
// memory limit.
const (
	maxStreamChunk = 1 << 20
	minStreamChunk = 64 << 10
	streamAhead    = 3
)

// streamChunk is the read-ahead's chunk: maxStreamChunk, or under a memory
// budget a 32nd of the bytes held outside the heap (Options.HeldBytes) when
// that is less, at least minStreamChunk, so the pass's buffers (five
// chunks) stay within the budget's slack: with fixed 1 MiB chunks a small
// budget's process would peak well above it while the pinning pass runs.
func (x *Index) streamChunk() int64 {
	c := int64(maxStreamChunk)
	if h := x.opts.HeldBytes; h > 0 {
		c = min(c, max(minStreamChunk, h/32/readahead.Align*readahead.Align))
	}
	return c
}
