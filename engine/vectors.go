package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/quant"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// A graph written without its vectors (FAISS's IO_FLAG_SKIP_STORAGE;
// faissfmt's null storage) is served over a separate vector file,
// Spec.VectorsPath: an .fvecs, .vec or float32 .npy file, or a FAISS file
// with flat float vectors (rerank.OpenLayout locates them). The vector
// file is opened with the index's backend (zstd: pread, as vector files
// are plain) and its own share of the cache; mode full reads it whole
// too; on_disk builds its guide from it and reranks from it.

// errVectorsMissing is the error for a graph without vectors and no
// vector file.
func errVectorsMissing(label string) error {
	return &FieldError{Field: "vectors_path", text: "%s: the vectors were left out of this file (IO_FLAG_SKIP_STORAGE); give them with {vectors_path}",
		args: []any{label}, inner: hnswsearch.ErrNoVectors}
}

// vectorsBackend is the backend that reads the vector file for an index
// read by backend.
func vectorsBackend(backend Backend) Backend {
	if backend == BackendZstd {
		return BackendPread
	}
	return backend
}

// planVectors checks the spec's vector file against the probed graph and
// plans its memory (p.vlayout, p.vcache, p.need).
func (p *Plan) planVectors() error {
	spec, pf := &p.spec, p.probe
	l, err := CheckVectors(pf, spec.Label, spec.VectorsPath, spec.VectorsLabel)
	if err != nil || l == nil {
		return err
	}
	fi, err := os.Stat(spec.VectorsPath)
	if err != nil {
		return partial.NameError(err, spec.VectorsPath, spec.VectorsLabel)
	}
	p.vlayout, p.vsize = l, fi.Size()
	vb := vectorsBackend(p.backend)
	p.vcache = storage.Options{CacheBytes: spec.CacheBytes, BlockSize: spec.CacheBlock}.CacheBudgetFor(vb, fi.Size())
	p.need += p.vcache
	if vb == BackendMemory {
		p.need += fi.Size()
	}
	return nil
}

// CheckVectors checks a vector file (path, named vlabel in errors; ""
// for none) against the graph of f (named label): a graph written without
// its vectors needs one of its count and dimension, in a format
// rerank.OpenLayout reads; a file holding its vectors takes none. It
// returns where the vectors lie (nil without a vector file).
func CheckVectors(f *faissfmt.File, label, path, vlabel string) (*rerank.Layout, error) {
	if vlabel == "" {
		vlabel = path
	}
	switch {
	case f.Graph == nil:
		return nil, nil // hnswsearch.New names the problem
	case !f.VectorsMissing() && path != "":
		return nil, fieldErr("vectors_path", "{vectors_path} is for a graph written without its vectors (IO_FLAG_SKIP_STORAGE); %s holds them", label)
	case !f.VectorsMissing():
		return nil, nil
	case path == "":
		return nil, errVectorsMissing(label)
	}
	g := f.Graph
	if g.Binary || g.FourCC == "IHNs" {
		// hnswsearch.New's words: which graphs cannot take a vector file.
		_, err := hnswsearch.New(context.Background(), f, nil, hnswsearch.Options{})
		return nil, &tagged{msg: fmt.Sprintf("%s: %v", label, err), tags: []error{ErrNotServable}, inner: err}
	}
	l, err := rerank.OpenLayoutAs(path, vlabel)
	switch {
	case errors.Is(err, rerank.ErrVectors): // names vlabel, the record and what is wrong
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%s: %w", vlabel, err)
	}
	bad := func(format string, a ...any) error {
		return &tagged{msg: fmt.Sprintf(format, a...), tags: []error{ErrBadSpec, partial.ErrBadOption, rerank.ErrVectors}}
	}
	switch {
	case l.Dim != g.D:
		return nil, bad("%s holds %d-dimensional vectors, the graph %s has dimension %d", vlabel, l.Dim, label, g.D)
	case l.Count != g.NTotal:
		return nil, bad("%s holds %d vectors, the graph %s has %d", vlabel, l.Count, label, g.NTotal)
	}
	return &l, nil
}

// splitBudgetCache gives a separate vector file half of a memory budget
// plan's block cache (the plan sized one cache for the index's reads).
func (p *Plan) splitBudgetCache() {
	if p.vlayout == nil || p.cacheBytes == 0 {
		return
	}
	p.vcache = p.cacheBytes / 2
	p.cacheBytes -= p.vcache
}

// openVectors opens the planned vector file and sets o.Vectors.
func (x *Index) openVectors(ctx context.Context, p *Plan, o *hnswsearch.Options) error {
	l := p.vlayout
	if l == nil {
		return nil
	}
	vst, err := storage.Open(ctx, p.spec.VectorsPath, storage.Options{Backend: vectorsBackend(p.backend), CacheBytes: p.vcache,
		BlockSize: p.spec.CacheBlock, AlignOffset: l.Base, S3: p.spec.Env.s3(), Name: p.spec.VectorsLabel})
	if err != nil {
		return fmt.Errorf("%s: %w", p.spec.VectorsLabel, err)
	}
	x.vst = vst // closed by the caller on an error
	if err := vectorsUnchanged(ctx, l, p.spec.VectorsPath, p.spec.VectorsLabel, vst); err != nil {
		return err
	}
	o.Vectors = &hnswsearch.Vectors{Storage: vst, Name: p.spec.VectorsLabel, Offset: l.Base, Stride: l.Stride, Count: l.Count, Dim: l.Dim}
	return nil
}

// vectorsUnchanged checks that the vector file st opened is the one
// Prepare checked (CheckVectors read every record's header): its path
// still names that file, unmodified, and st reads it. A file replaced or
// written between Prepare and Open would otherwise be served unchecked.
func vectorsUnchanged(ctx context.Context, l *rerank.Layout, path, label string, st partial.Storage) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", label, partial.NameError(err, path, label))
	}
	if l.Unchanged(fi) {
		c, ok := st.(partial.FileChecker)
		if !ok {
			return nil
		}
		if err = c.CheckFile(ctx); err == nil {
			return nil
		}
	}
	return &tagged{msg: fmt.Sprintf("%s changed after it was checked; load it again", label), tags: []error{partial.ErrFileChanged}, inner: err}
}

// guideSource is where on_disk's guide reads the vectors from, as
// quant.Build takes them (n·d float32 contiguous from off), and the
// identity the guide file records: the index file's own vectors section
// (mtime: the file's modification time as the load opened it; in st), or
// a separate vector file (in vst, its rows read as if contiguous). The
// reads end with ctx.
func guideSource(ctx context.Context, st partial.Storage, f *faissfmt.File, path string, mtime time.Time, vst partial.Storage, l *rerank.Layout) (io.ReaderAt, int64, quant.SourceID, error) {
	if l == nil {
		if storage.IsRemote(path) {
			return remoteGuideSource(ctx, st, f, path)
		}
		r := partial.ReaderAt(ctx, st)
		src, err := identify(r, f, mtime)
		sec, _ := f.Storage.Section("codes")
		return r, sec.Offset, src, err
	}
	fi, err := os.Stat(l.Path)
	if err != nil {
		return nil, 0, quant.SourceID{}, err
	}
	size := fi.Size()
	vr := partial.ReaderAt(ctx, vst)
	src, err := quant.Identify(vr, size, fi.ModTime().UnixNano(), vectorFileRanges(size))
	if err != nil {
		return nil, 0, src, fmt.Errorf("identifying the vector file for its guide: %w", err)
	}
	return stridedReader{r: vr, base: l.Base, stride: l.Stride, row: int64(l.Dim) * 4}, 0, src, nil
}

// vectorFileRanges are the byte ranges of a vector file a guide's identity
// hashes: its head and tail and 32 blocks spread between.
func vectorFileRanges(size int64) []quant.Range {
	const block = 4096
	if size <= 34*block {
		return []quant.Range{{Off: 0, Len: size}}
	}
	out := []quant.Range{{Off: 0, Len: block}}
	for i := int64(1); i <= 32; i++ {
		out = append(out, quant.Range{Off: i * (size - block) / 33, Len: block})
	}
	return append(out, quant.Range{Off: size - block, Len: block})
}

// stridedReader presents vectors stored every stride bytes from base
// (row bytes each) as one contiguous array from offset 0.
type stridedReader struct {
	r                 io.ReaderAt
	base, stride, row int64
}

func (s stridedReader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	// One read of the rows' span, then the rows' bytes copied out.
	first, last := off/s.row, (off+int64(len(p))-1)/s.row
	raw := make([]byte, (last-first)*s.stride+s.row)
	if _, err := s.r.ReadAt(raw, s.base+first*s.stride); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		i, in := off/s.row, off%s.row
		m := copy(p, raw[(i-first)*s.stride+in:(i-first)*s.stride+s.row])
		n += m
		p, off = p[m:], off+int64(m)
	}
	return n, nil
}
