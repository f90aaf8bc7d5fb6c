package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// source is the file or object a load serves, opened once by Prepare and
// reused by every later step: what it is (size, modification time: the
// handle's identity at open, or an object's size and ETag), its kind (a
// plain file or a seekable zstd one), its parse, and the open file or
// object the served storage is built on (Plan.Open hands it to
// storage.Open). Nothing after Prepare looks the path up again, so every
// step reads the same file even if another is put at the path meanwhile.
type source struct {
	path  string
	label string          // what messages call it (Spec.Label)
	s3    *s3.Client      // opens an s3:// object (Env's; nil: a client per open)
	h     *partial.Handle // a local file, until a storage takes it over
	obj   *s3.Object      // an s3:// object read on demand, likewise
	zstd  bool            // a local file in the seekable zstd format
	size  int64           // a local file's size
	mtime time.Time       // and modification time, for a guide's identity
	parse *faissfmt.File  // headers and small arrays (the probe)
}

// openHandle opens a load's local file: the one lookup of its path.
// Tests count through it.
var openHandle = partial.OpenHandle

// openSource opens the file at path, named label in errors, and finds its
// kind; an s3:// object is opened by the probe (probeRemote), which knows
// the backend, or by a later step, through client.
func openSource(path, label string, client *s3.Client) (*source, error) {
	s := &source{path: path, label: label, s3: client}
	if storage.IsRemote(path) {
		return s, nil
	}
	h, err := openHandle(path, partial.Named(label))
	if err != nil {
		return nil, err
	}
	s.h, s.size, s.mtime = h, h.Size(), h.ModTime()
	s.zstd = zstd.IsSeekableAt(h, h.Size())
	return s, nil
}

// autoBackend is the backend of mode memory_efficient (and on_disk) when
// none is named: s3 for an object, zstd for a zstd file,
// DefaultMemoryEfficientBackend otherwise.
func (s *source) autoBackend() Backend {
	switch {
	case storage.IsRemote(s.path):
		return BackendS3
	case s.zstd:
		return BackendZstd
	}
	return DefaultMemoryEfficientBackend
}

// fits refuses a backend that cannot read the file as it is stored: zstd
// on a plain file, another backend on a zstd file. Errors name the file
// by its label.
func (s *source) fits(backend Backend) error {
	if storage.IsRemote(s.path) {
		return nil // an object: storage.Open says which backends read it
	}
	mismatch := func(format string, a ...any) error {
		return &tagged{msg: fmt.Sprintf(format, a...), tags: []error{ErrBackendMismatch, partial.ErrBadOption}}
	}
	switch {
	case backend == BackendZstd && !s.zstd:
		return mismatch("backend zstd reads files in the zstd seekable format (faiss-sidecar compress); %s is not one", filepath.Base(s.label))
	case backend != BackendZstd && s.zstd:
		return mismatch("%s is zstd-compressed data (seekable format): load it with backend zstd, or leave backend out", filepath.Base(s.label))
	}
	return nil
}

// borrowed reads a source's handle for a probe or a sample: closing it
// leaves the handle open.
type borrowed struct{ *partial.Handle }

// ReadAtContext reads the handle (partial.Storage), none once ctx has
// ended: the one pread is the only step that blocks.
func (b borrowed) ReadAtContext(ctx context.Context, p []byte, off int64, _ *partial.Tally) (int, error) {
	if err := partial.Interrupted(ctx); err != nil {
		return 0, fmt.Errorf("%s: read of %d bytes at offset %d given up: %w", b.Name(), len(p), off, err)
	}
	return b.ReadAt(p, off)
}

func (borrowed) Close() error { return nil }

// reader is a storage over the local file for reading a few small ranges
// (the parse, a sample of lists), decompressed for a zstd file, through a
// block cache of cacheBytes; closing it leaves the file open. Errors name
// the file by its label.
func (s *source) reader(cacheBytes int64) (partial.Storage, error) {
	if s.zstd {
		return zstd.New(borrowed{s.h}, s.label, nil, cacheBytes)
	}
	return blockcache.NewCached(s.label, borrowed{s.h}, nil, cacheBytes, 0)
}

// probe parses the source as backend presents it (decompressed for zstd,
// the file itself otherwise) through a small block cache: headers and
// small arrays only, to learn its sizes before committing memory to it.
// An s3:// object read on demand is opened here and kept (probeRemote); a
// whole download's is opened for the parse alone. Its reads end with ctx;
// errors name the file by its label.
func (s *source) probe(ctx context.Context, spec Spec, backend Backend) error {
	if s.parse != nil { // parsed for an earlier plan of the same load (Replan)
		return nil
	}
	var st partial.Storage
	var err error
	switch {
	case storage.IsRemote(s.path) && backend != BackendMemory:
		s.parse, s.obj, err = probeRemote(ctx, spec)
		return err
	case storage.IsRemote(s.path):
		st, err = storage.Open(ctx, s.path, storage.Options{Backend: BackendPread, CacheBytes: 1 << 20, S3: s.s3, Name: s.label})
	default:
		st, err = s.reader(1 << 20)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	s.parse, err = s.parseOf(ctx, st)
	return err
}

// parseOf is Parse of the source as st reads it, under ctx, whose errors
// name the file by its label.
func (s *source) parseOf(ctx context.Context, st partial.Storage) (*faissfmt.File, error) {
	f, err := Parse(ctx, st, s.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.label, err)
	}
	return f, nil
}

// sample is a storage that reads a few small ranges of the source for
// planning (EstimatePinnedLists), closed by the caller, read as backend
// reads: for direct, with direct I/O on a descriptor of its own
// (O_DIRECT belongs to the open file), made from the handle, not the
// path. An object's open ends with ctx (the sample's reads take their
// own); errors name the file by its label.
func (s *source) sample(ctx context.Context, backend Backend) (partial.Storage, error) {
	switch {
	case storage.IsRemote(s.path):
		return storage.Open(ctx, s.path, storage.Options{Backend: BackendPread, CacheBytes: 1 << 20, Object: s.obj, KeepObject: s.obj != nil,
			S3: s.s3, Name: s.label})
	case backend == BackendDirect:
		h, err := s.h.Reopen()
		if err != nil {
			return nil, err
		}
		return partial.NewDirect(h, 0)
	}
	return s.reader(1 << 20)
}

// take hands the open file and object to the storage about to be built on
// them, which owns them from then on; changed reports whether the file
// changed since it was opened (its parse is then stale). A second take
// (a plan opened twice) has nothing to give: the storage opens the path.
func (s *source) take() (h *partial.Handle, obj *s3.Object, changed bool) {
	h, obj = s.h, s.obj
	s.h, s.obj = nil, nil
	if h != nil {
		c, err := h.Restat()
		changed = c || err != nil
		s.size, s.mtime = h.Size(), h.ModTime()
	}
	return h, obj, changed
}

// reusable is the probe's parse for a storage built on what take gave
// (h or obj), when the file did not change meanwhile: an object's every
// read is pinned to the ETag the probe saw. Nil otherwise: parse again.
func (s *source) reusable(h *partial.Handle, obj *s3.Object, changed bool) *faissfmt.File {
	if (h == nil && obj == nil) || changed {
		return nil
	}
	return s.parse
}

// close releases what the source holds (a plan that will not be opened).
func (s *source) close() {
	h, obj := s.h, s.obj
	s.h, s.obj = nil, nil
	if h != nil {
		h.Close()
	}
	if obj != nil {
		obj.Close()
	}
}

// Probe parses the FAISS file at path as backend presents it (decompressed
// for zstd, the file itself otherwise) without loading it, to learn its
// sizes and small arrays before committing memory to it.
func Probe(path string, backend Backend) (*faissfmt.File, error) {
	s, err := openSource(path, path, nil)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if err := s.probe(context.Background(), Spec{Path: path, Label: path}, backend); err != nil {
		return nil, err
	}
	return s.parse, nil
}
