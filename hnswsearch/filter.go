package hnswsearch

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
)

// reverseMap maps external ids to internal ids: (external, internal) pairs
// sorted by external id, built on the first filtered query of an index with
// an id map (16 bytes per vector).
type reverseMap struct {
	ext []int64
	in  []int32
}

func (x *Index) reverseIDs(ctx context.Context) (*reverseMap, error) {
	if r := x.reverse.Load(); r != nil {
		return r, nil
	}
	x.reverseMu.Lock()
	defer x.reverseMu.Unlock()
	if r := x.reverse.Load(); r != nil {
		return r, nil
	}
	n := int(x.n)
	type kv struct {
		ext int64
		in  int32
	}
	pairs := make([]kv, n)
	buf := make([]byte, 1<<16)
	for i := 0; i < n; {
		m := min(len(buf)/8, n-i)
		if _, err := x.st.ReadAtContext(ctx, buf[:8*m], x.idMap.Offset+8*int64(i), nil); err != nil {
			return nil, fmt.Errorf("reading the id map: %w", err)
		}
		for j := range m {
			pairs[i+j] = kv{int64(binary.LittleEndian.Uint64(buf[8*j:])), int32(i + j)}
		}
		i += m
	}
	slices.SortFunc(pairs, func(a, b kv) int { return cmp.Compare(a.ext, b.ext) })
	r := &reverseMap{ext: make([]int64, n), in: make([]int32, n)}
	for i, p := range pairs {
		r.ext[i], r.in[i] = p.ext, p.in
	}
	x.reverse.Store(r)
	return r, nil
}

// setFilter turns allowed external ids into a bitset over internal ids and
// returns how many internal ids it allows. Unknown ids are ignored.
func (x *Index) setFilter(s *scratch, ids []int64) (int, error) {
	words := (int(x.n) + 63) / 64
	if cap(s.allowed) < words {
		s.allowed = make([]uint64, words)
	}
	s.allowed = s.allowed[:words]
	clear(s.allowed)
	count := 0
	set := func(v int32) {
		if s.allowed[v>>6]&(1<<uint(v&63)) == 0 {
			s.allowed[v>>6] |= 1 << uint(v&63)
			count++
		}
	}
	if x.idMap == nil {
		for _, id := range ids {
			if id >= 0 && id < int64(x.n) {
				set(int32(id))
			}
		}
	} else {
		r, err := x.reverseIDs(s.ctx)
		if err != nil {
			return 0, err
		}
		for _, id := range ids {
			i, _ := slices.BinarySearch(r.ext, id)
			for ; i < len(r.ext) && r.ext[i] == id; i++ {
				set(r.in[i])
			}
		}
	}
	s.sel = s.allowed
	return count, nil
}
