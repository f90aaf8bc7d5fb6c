package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/quant"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// Mode on_disk over an s3:// object. The guide is built by streaming the
// object's vectors section in large ranged GETs, several in flight
// (internal/readahead over the object itself, past any cache), and kept on
// local disk: in Spec.GuideDir, or by default in Spec.RemoteGuideDir. Its
// source identity is the object's size and ETag, so a replaced object's
// guide is stale (rebuilt, never used). Shortlists are reranked from the
// object with rerank strategy batch: each shortlist one batch of parallel
// ranged GETs, read beneath the memory block cache (whose blocks are sized
// for the graph: a vector read through it would cost a whole block), so a
// query whose lists are pinned makes one round of reads.

// remoteGuideDir fills in an s3:// index's guide directory when the spec
// gives none (planOnDisk): Spec.RemoteGuideDir, the caller's default; with
// neither the load is refused naming guide_dir.
func remoteGuideDir(spec *Spec) error {
	if !storage.IsRemote(spec.Path) || spec.GuideDir != "" {
		return nil
	}
	if spec.RemoteGuideDir == "" {
		return fieldErr("guide_dir", "%s: the on_disk guide of an s3:// index is kept on local disk, and no {guide_dir} is given", spec.Label)
	}
	spec.GuideDir = spec.RemoteGuideDir
	return nil
}

// sharedGuideName is the guide file's name, before "."+level+".guide", in
// a directory that holds the guides of many indexes (an s3:// index's, or
// any in a guide_dir): the file's or key's last element (at most 100
// bytes of it) and 12 hex digits of the SHA-256 of its whole path (for a
// file, absolute), so indexes of one name in other directories, buckets
// or prefixes (OpenSearch names segment files alike in every shard) do
// not share a guide file and rebuild it over each other.
func sharedGuideName(indexPath string) string {
	base := path.Base(indexPath)
	if !storage.IsRemote(indexPath) {
		if abs, err := filepath.Abs(indexPath); err == nil {
			indexPath = abs
		}
		base = filepath.Base(indexPath)
	}
	if len(base) > 100 {
		base = strings.ToValidUTF8(base[:100], "")
	}
	sum := sha256.Sum256([]byte(indexPath))
	return base + "." + hex.EncodeToString(sum[:6])
}

// objectOf is the s3 object under a storage (through caches that name
// their inner storage), nil when st is not one.
func objectOf(st partial.Storage) *s3.Object {
	for st != nil {
		switch s := st.(type) {
		case *s3.Object:
			return s
		case interface{ Inner() partial.Storage }:
			st = s.Inner()
		case *diskcache.Cache:
			st = s.Inner()
		default:
			return nil
		}
	}
	return nil
}

// objectSource is an object's identity in its guide: its size, and the
// SHA-256 of its ETag in place of the hash of sampled bytes (the ETag
// changes whenever the object is written; reading samples would cost a GET
// each at every open).
func objectSource(o *s3.Object) quant.SourceID {
	return quant.SourceID{Size: o.Size(), Hash: sha256.Sum256([]byte("s3 ETag " + o.ETag()))}
}

// remoteGuideSource is guideSource for an s3:// index's own vectors: the
// object beneath every cache (buildGuide streams it ahead in
// readahead.DefaultChunk GETs), read under ctx, and the object's identity.
func remoteGuideSource(ctx context.Context, st partial.Storage, f *faissfmt.File, label string) (io.ReaderAt, int64, quant.SourceID, error) {
	o := objectOf(st)
	if o == nil {
		return nil, 0, quant.SourceID{}, fmt.Errorf("%s: the storage serving it is not an s3 object (%T): its guide cannot be identified", label, st)
	}
	sec, _ := f.Storage.Section("codes")
	return objectReader{ctx, o}, sec.Offset, objectSource(o), nil
}

// objectReader reads an object under ctx: a guide's source that
// buildGuide streams ahead.
type objectReader struct {
	ctx context.Context
	*s3.Object
}

func (r objectReader) ReadAt(p []byte, off int64) (int, error) {
	return r.ReadAtContext(r.ctx, p, off, nil)
}

// remoteRerank opens the rerank vectors of an index that reranks from the
// s3:// object it serves: its own vectors, through its storage beneath
// the memory block cache, with strategy batch; shared reports it (ok is
// false for any other rerank source).
func (x *Index) remoteRerank(rs *RerankSpec) (s *rerank.Store, ok bool, err error) {
	if !storage.IsRemote(rs.Path) || rs.Path != x.spec.Path || x.file.Storage == nil {
		return nil, false, nil
	}
	l, err := rerank.FAISSLayout(x.file, rs.Path)
	if err != nil {
		return nil, true, err
	}
	st := x.st
	if c, isCached := st.(*blockcache.Cached); isCached {
		st = c.Inner()
	}
	s = rerank.NewBatch(st, l)
	s.SetAVX512(x.spec.Env.avx512())
	return s, true, nil
}

// OpenVectors opens a rerank vector file for a front end: an s3:// object
// (through env's client) with strategy batch, whatever strategy is named
// (the others read local files), else the local file with strategy, the
// direct strategy keeping parallel reads in flight (≤ 0:
// rerank.DefaultParallel); its kernel is env's choice.
func OpenVectors(env *Env, path, strategy string, parallel int) (*rerank.Store, error) {
	if storage.IsRemote(path) {
		return openVectorObject(context.Background(), env, path, path)
	}
	return openVectorFile(env, path, path, strategy, parallel)
}

// openVectorObject opens the vector file in the s3:// object at path with
// strategy batch through env's client, naming it name in errors; its
// requests while it opens end with ctx.
func openVectorObject(ctx context.Context, env *Env, path, name string) (*rerank.Store, error) {
	o, err := env.s3().Open(ctx, path, s3.Options{})
	if err != nil {
		return nil, err
	}
	s, err := rerank.OpenStorage(ctx, o, name)
	if err != nil {
		return nil, err
	}
	s.SetAVX512(env.avx512())
	return s, nil
}

// probeRemote is Prepare's probe of an s3:// index: the object opened once
// and parsed through a small block cache (and the disk cache, when spec
// has one; whole arrays bypass the block cache, and the levels and
// offsets come in one read: storage.ParseWindow), then kept open for
// Plan.Open, which builds its storage on it and reuses the parse. So an
// open costs the object's first GET, the arrays', the storage header's and
// the search's first lists, not twice that.
func probeRemote(ctx context.Context, spec Spec) (*faissfmt.File, *s3.Object, error) {
	obj, err := spec.Env.s3().Open(ctx, spec.Path, s3.Options{})
	if err != nil {
		return nil, nil, err
	}
	st, err := storage.Open(ctx, spec.Path, storage.Options{Backend: BackendPread, CacheBytes: 1 << 20, Object: obj, KeepObject: true,
		CacheDir: spec.CacheDir})
	if err != nil {
		obj.Close()
		return nil, nil, err
	}
	f, err := faissfmt.OpenWith(partial.ReaderAt(ctx, st), st.Size(), faissfmt.OpenOptions{AllowNullStorage: true, Window: storage.ParseWindow(spec.Path)})
	st.Close()
	if err != nil {
		obj.Close()
		return nil, nil, fmt.Errorf("%s: %w", spec.Label, err)
	}
	return f, obj, nil
}

// Discard releases what a plan that will not be opened holds (the
// index's open file, or an object's connection).
func (p *Plan) Discard() { p.src.close() }
