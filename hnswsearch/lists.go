package hnswsearch

import (
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// listSource is where the search gets neighbor lists, chosen once by New
// (chooseLists): the section viewed in place, pinned lists in front of
// another source, or reads through the backend and its block cache.
type listSource interface {
	// get returns node v's slot list on level l as raw little-endian
	// int32s, counting its cost in s.st. The bytes stay valid until the
	// next get on s or the query's end.
	get(s *scratch, v int32, l int) ([]byte, error)
	// held returns v's list on level l when it is held in memory (viewed
	// or pinned), uncounted: read-ahead looks at it.
	held(v int32, l int) ([]byte, bool)
	// prefetch starts loading v's list on level l into the CPU caches when
	// it is in memory (held, or in a cached block), uncounted.
	prefetch(v int32, l int)
}

// chooseLists picks the list source for what New found and pinned.
func (x *Index) chooseLists() listSource {
	var src listSource
	switch {
	case x.nbView != nil:
		return &viewLists{h: x.h, b: x.nbView}
	default:
		src = &readLists{x: x, h: x.h, off: x.nb.Offset, blocks: x.blocks}
	}
	if x.pinned != nil {
		src = &pinnedSource{p: x.pinned, h: x.h, rest: src}
	}
	return src
}

// viewLists serves the neighbors section viewed in place.
type viewLists struct {
	h *faissfmt.HNSW
	b []byte
}

func (l *viewLists) get(s *scratch, v int32, lv int) ([]byte, error) {
	b, e := l.h.NeighborSlots(v, lv)
	s.st.BytesRead += (e - b) * 4
	return l.b[b*4 : e*4], nil
}

func (l *viewLists) held(v int32, lv int) ([]byte, bool) {
	b, e := l.h.NeighborSlots(v, lv)
	return l.b[b*4 : e*4], true
}

func (l *viewLists) prefetch(v int32, lv int) {
	b, e := l.h.NeighborSlots(v, lv)
	distance.Prefetch(l.b[b*4 : e*4])
}

// readLists reads lists through the backend: from cached blocks in place
// when the backend keeps them (blocks not nil), else into s.nbuf.
type readLists struct {
	x      *Index
	h      *faissfmt.HNSW
	off    int64
	blocks partial.BlockViewer
}

func (l *readLists) get(s *scratch, v int32, lv int) ([]byte, error) {
	b, e := l.h.NeighborSlots(v, lv)
	n := (e - b) * 4
	s.st.BytesRead += n
	buf := s.nbuf[:n]
	if l.blocks != nil {
		if v, ok := l.blocks.ViewBlock(l.off+b*4, n, &s.st.IO); ok {
			return v, nil
		}
		if l.blocks.CopyCached(buf, l.off+b*4, &s.st.IO) {
			return buf, nil
		}
	}
	s.st.Reads++
	if _, err := l.x.readAt(s, buf, l.off+b*4); err != nil {
		return nil, fmt.Errorf("reading the neighbors of node %d on level %d: %w", v, lv, err)
	}
	return buf, nil
}

func (l *readLists) held(int32, int) ([]byte, bool) { return nil, false }

func (l *readLists) prefetch(v int32, lv int) {
	if l.blocks == nil {
		return
	}
	b, e := l.h.NeighborSlots(v, lv)
	if list, ok := l.blocks.ViewBlock(l.off+b*4, (e-b)*4, nil); ok {
		distance.Prefetch(list)
	}
}

// pinnedSource serves the pinned lists (pinned.go), and the others from rest.
type pinnedSource struct {
	p    *pinnedLists
	h    *faissfmt.HNSW
	rest listSource
}

func (l *pinnedSource) get(s *scratch, v int32, lv int) ([]byte, error) {
	list, ok := l.p.list(l.h, v, lv)
	if !ok {
		return l.rest.get(s, v, lv)
	}
	b, e := l.h.NeighborSlots(v, lv)
	s.st.BytesRead += (e - b) * 4
	s.st.BytesPinned += int64(len(list))
	return list, nil
}

func (l *pinnedSource) held(v int32, lv int) ([]byte, bool) { return l.p.list(l.h, v, lv) }

func (l *pinnedSource) prefetch(v int32, lv int) {
	if list, ok := l.p.list(l.h, v, lv); ok {
		distance.Prefetch(list)
	}
}

// readAt reads through the backend under the query's context, attributing
// its I/O to the query.
func (x *Index) readAt(s *scratch, p []byte, off int64) (int, error) {
	return x.st.ReadAtContext(s.ctx, p, off, &s.st.IO)
}
