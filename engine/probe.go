package engine

import (
	"context"
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// Probe parses the FAISS file at path as backend presents it (decompressed
// for zstd, the file itself otherwise) without loading it, to learn its
// sizes and small arrays before committing memory to it. The engine opens
// the storage so that the search package names no backend.
func Probe(path, backend string) (*faissfmt.File, error) {
	return probe(context.Background(), path, backend)
}

// probe is Probe whose reads end with ctx.
func probe(ctx context.Context, path, backend string) (*faissfmt.File, error) {
	o := storage.Options{Backend: "pread", CacheBytes: 1 << 20}
	if backend == "zstd" {
		o.Backend = "zstd"
	}
	s, err := storage.Open(ctx, path, o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	// A graph written without its vectors parses (File.VectorsMissing):
	// the caller gives them as Options.Vectors.
	f, err := faissfmt.OpenWith(partial.ReaderAt(ctx, s), s.Size(), faissfmt.OpenOptions{AllowNullStorage: true, Window: storage.ParseWindow(path)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
