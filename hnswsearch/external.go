package hnswsearch

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// Vectors is a vector source outside the index file, for a graph written
// without its vectors (FAISS's IO_FLAG_SKIP_STORAGE: faissfmt reads its
// storage as "null", File.VectorsMissing). Vector i's Dim little-endian
// float32 values are the bytes [Offset + i·Stride, … + Dim·4) of Storage:
// an .fvecs, .vec or .npy file or a FAISS flat file, as rerank.OpenLayout
// locates them. The search reads the vectors through Storage as it reads
// the graph through the index's storage (zero-copy views when Storage is
// a partial.Viewer); Storage must stay open until the Index is closed.
type Vectors struct {
	Storage partial.Storage
	// Name is how errors name the file.
	Name string
	// Offset is vector 0's first byte; Stride the bytes from one vector
	// to the next (at least Dim·4).
	Offset, Stride int64
	// Count and Dim are what the file holds, which must be the graph's.
	Count int64
	Dim   int
}

// ErrNoVectors marks a graph whose vectors were left out of its file,
// opened without Options.Vectors.
var ErrNoVectors = errors.New("the vectors were left out of this file (IO_FLAG_SKIP_STORAGE)")

// vectorsOf sets where x's vectors are: the storage section of f, served
// by s, or o.Vectors for a graph without one. It sets x.vst, x.codes,
// x.vstride and x.codeSize.
func (x *Index) vectorsOf(f *faissfmt.File, s partial.Storage, o *Vectors) error {
	g := f.Graph
	if !f.VectorsMissing() {
		if o != nil {
			return fmt.Errorf("%w: a separate vector file (%s) is for a graph written without its vectors; this %s file holds them", ErrBadOption, o.Name, g.FourCC)
		}
		st := f.Storage
		x.codes, _ = st.Section("codes")
		x.codeSize = int(st.CodeSize)
		x.vst, x.vstride = s, st.CodeSize
		return nil
	}
	switch {
	case g.Binary:
		return fmt.Errorf("%w: the binary graph %s was written without its vectors; only float graphs (IHNf, IHc2, IHNc) take a separate vector file", ErrNoVectors, g.FourCC)
	case g.FourCC == "IHNs":
		return fmt.Errorf("%w: the IHNs graph was written without its scalar-quantized storage, and with it the quantizer's parameters: it cannot be searched", ErrNoVectors)
	case o == nil:
		return fmt.Errorf("%w: give them as a separate vector file", ErrNoVectors)
	case o.Storage == nil:
		return fmt.Errorf("%w: Vectors without a Storage", ErrBadOption)
	}
	// A float graph over null storage: flat float32 vectors (faissfmt
	// reports code size 0, as the null node has none).
	cs := int64(g.D) * 4
	switch {
	case o.Dim != g.D:
		return fmt.Errorf("%w: %s holds %d-dimensional vectors, the graph has dimension %d", ErrBadOption, o.Name, o.Dim, g.D)
	case o.Count != g.NTotal:
		return fmt.Errorf("%w: %s holds %d vectors, the graph has %d", ErrBadOption, o.Name, o.Count, g.NTotal)
	case o.Stride < cs || o.Offset < 0:
		return fmt.Errorf("%w: %s: vectors of %d bytes every %d bytes from byte %d", ErrBadOption, o.Name, cs, o.Stride, o.Offset)
	}
	n := g.NTotal
	var span int64
	if n > 0 {
		span = (n-1)*o.Stride + cs
	}
	if end := o.Offset + span; end > o.Storage.Size() {
		return fmt.Errorf("%w: %s: %d vectors end at byte %d, the file has %d bytes", ErrBadOption, o.Name, n, end, o.Storage.Size())
	}
	x.codes = faissfmt.Section{Name: "codes", Offset: o.Offset, Len: span, Elem: int(o.Stride)}
	x.codeSize = int(cs)
	x.vst, x.vstride, x.external = o.Storage, o.Stride, true
	return nil
}

// vreadAt reads vector bytes through the vectors' storage under the
// query's context, attributing its I/O to the query.
func (x *Index) vreadAt(s *scratch, p []byte, off int64) (int, error) {
	return x.vst.ReadAtContext(s.ctx, p, off, &s.st.IO)
}

// vectorOffset is where vector v starts in the vectors' storage.
func (x *Index) vectorOffset(v int32) int64 { return x.codes.Offset + int64(v)*x.vstride }

// faultError is partial.FaultError over the index's storages: the graph's,
// then a separate vector file's.
func (x *Index) faultError(r any) (error, bool) {
	if err, ok := partial.FaultError(x.st, r); ok || !x.external {
		return err, ok
	}
	return partial.FaultError(x.vst, r)
}

// checkVectorFD is the separate vector file's per-query check (see
// fileCheck).
func (x *Index) checkVectorFD() error {
	if !x.external || !checkFiles {
		return nil
	}
	if c, ok := x.vst.(partial.FileChecker); ok {
		return c.CheckFD()
	}
	return nil
}

// checkVectorFile is partial.FileChecker.CheckFile of a separate vector
// file (nil without one).
func (x *Index) checkVectorFile(ctx context.Context) error {
	if !x.external {
		return nil
	}
	if c, ok := x.vst.(partial.FileChecker); ok {
		return c.CheckFile(ctx)
	}
	return nil
}

// recoverFault is partial.RecoverFault over the index's storages (see
// faultError); defer it directly.
func (x *Index) recoverFault(prev bool, err *error) {
	debug.SetPanicOnFault(prev)
	if r := recover(); r != nil {
		ferr, ok := x.faultError(r)
		if !ok {
			panic(r)
		}
		*err = ferr
	}
}

// VectorCodeSize is the bytes of one stored vector of f's graph: its
// storage's code size, or d·4 for a float graph whose vectors were left
// out of the file (they are then flat float32 in a separate file).
func VectorCodeSize(f *faissfmt.File) int64 {
	if f.Storage != nil {
		return f.Storage.CodeSize
	}
	if g := f.Graph; g != nil && !g.Binary {
		return int64(g.D) * 4
	}
	return 0
}
