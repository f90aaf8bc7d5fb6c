package hnswsearch

import (
	"context"
	"errors"
	"runtime/debug"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// A file served in memory_efficient mode may change under the index: an
// operator truncates it, copies a smaller file over it, rewrites it in
// place. Queries then must neither crash the process nor answer from a mix
// of two versions' bytes. So every query entry point (Search,
// SearchBinary, and SearchBatch through them, ExternalID, Warm):
//
//   - runs with runtime/debug.SetPanicOnFault set for its goroutine, so a
//     fault on a mapped page the file no longer covers (SIGBUS) panics
//     instead of killing the process; the panic is recovered and, when the
//     address lies in the storage's mapping, returned as an error wrapping
//     partial.ErrFileChanged (partial.FaultError). The query's scratch is
//     then dropped, not pooled: the fault cut it short mid-update;
//   - ends with the storage's partial.FileChecker.CheckFD after its last
//     read: a change since the file was opened turns the answer into that
//     error (see partial's comment on why a match after the query proves
//     every byte it read was of the opened version). The storage stays
//     changed, so every later query fails the same way.
//
// checkFiles is off only in BenchmarkFileCheck, to measure the check.
var checkFiles = true

// fileCheck is the storage's per-query check (nil without one).
func (x *Index) fileCheck() error {
	if c, ok := x.st.(partial.FileChecker); ok && checkFiles {
		if err := c.CheckFD(); err != nil {
			return err
		}
	}
	return x.checkVectorFD()
}

// guarded runs one query on s: faults on mapped memory become errors, and
// a change of the file since it was opened replaces the answer with the
// error saying so. s goes back to the pool unless a fault cut the query
// short.
func (x *Index) guarded(s *scratch, p Params, dst []Result) ([]Result, Stats, error) {
	return guard(x, s, dst, func(dst []Result) ([]Result, Stats, error) { return x.run(s, p, dst) })
}

// guard runs one query of any kind (run, appending to dst) under guarded's
// rules; St is its statistics' type.
func guard[St any](x *Index, s *scratch, dst []Result, run func([]Result) ([]Result, St, error)) (res []Result, st St, err error) {
	n0 := len(dst)
	prev := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(prev)
		if r := recover(); r != nil {
			ferr, ok := x.faultError(r) // the index file or a separate vector file
			if !ok {
				panic(r)
			}
			var none St
			res, st, err = dst[:n0], none, ferr
			return
		}
		s.ctx = context.Background() // a pooled scratch keeps no request's context
		x.scratch.Put(s)
	}()
	res, st, err = run(dst)
	err = s.deadlineErr(err)
	if err != nil && errors.Is(err, ErrBadQuery) {
		return res, st, err
	}
	if cerr := x.fileCheck(); cerr != nil {
		return dst[:n0], st, cerr
	}
	return res, st, err
}

// Warm is warm (below) with the file checked: a fault on the mapping, a
// read that fails because the file changed, or a change found after the
// warm-up (partial.FileChecker.CheckFile, which also looks at the path)
// is an error wrapping partial.ErrFileChanged, so a warm-up never succeeds
// on a file that queries will then fail on. Its reads and checks give up
// when ctx ends.
func (x *Index) Warm(ctx context.Context, maxBytes int64) (err error) {
	defer x.recoverFault(debug.SetPanicOnFault(true), &err)
	err = x.warm(ctx, maxBytes)
	if errors.Is(err, partial.ErrStoreFailed) {
		// A check of an object store that just failed to answer would
		// wait as long again (a replaced object fails its reads already).
		return err
	}
	if c, ok := x.st.(partial.FileChecker); ok {
		if cerr := c.CheckFile(ctx); errors.Is(cerr, partial.ErrFileChanged) {
			return cerr
		}
	}
	if cerr := x.checkVectorFile(ctx); errors.Is(cerr, partial.ErrFileChanged) {
		return cerr
	}
	return err
}
