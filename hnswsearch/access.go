package hnswsearch

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime/debug"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// ExternalID maps a label (internal id) to the external id through the id
// map, if any; safe for concurrent use. A read of the id map gives up when
// ctx ends (nil: never), as a query's reads do (Params.Ctx).
func (x *Index) ExternalID(ctx context.Context, label int32) (id int64, err error) {
	if label < 0 || label >= x.n {
		return -1, fmt.Errorf("%w: label %d is out of range [0, %d)", ErrBadQuery, label, x.n)
	}
	if x.idMap == nil {
		return int64(label), nil
	}
	defer partial.RecoverFault(x.st, debug.SetPanicOnFault(true), &err) // the id map may be mapped
	s := x.scratch.Get().(*scratch)
	s.ctx = queryContext(ctx)
	if id, err = x.externalID(s, label); err == nil {
		err = x.fileCheck()
	}
	s.ctx = context.Background()
	x.scratch.Put(s)
	return id, err
}

// externalID maps an internal id through the id map, if any.
func (x *Index) externalID(s *scratch, v int32) (int64, error) {
	if x.idMap == nil {
		return int64(v), nil
	}
	if x.idView != nil {
		return int64(binary.LittleEndian.Uint64(x.idView[8*int64(v):])), nil
	}
	s.st.Reads++
	s.st.BytesRead += 8
	if _, err := x.readAt(s, s.idbuf, x.idMap.Offset+8*int64(v)); err != nil {
		return 0, fmt.Errorf("reading id_map[%d]: %w", v, err)
	}
	return int64(binary.LittleEndian.Uint64(s.idbuf[:])), nil
}
