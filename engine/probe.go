package engine

import (
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// Probe parses the FAISS file at path as backend presents it (decompressed
// for zstd, the file itself otherwise) without loading it, to learn its
// sizes and small arrays before committing memory to it. The engine opens
// the storage so that the search package names no backend.
func Probe(path, backend string) (*faissfmt.File, error) { return probe(path, path, backend, nil, nil) }

// probe is Probe naming the file label in its errors, its object-store
// requests going through c and ending with bind.
func probe(path, label, backend string, c *s3.Client, bind *s3.Binding) (*faissfmt.File, error) {
	o := storage.Options{Backend: "pread", CacheBytes: 1 << 20, Binding: bind, S3: c, Name: label}
	if backend == "zstd" {
		o.Backend = "zstd"
	}
	s, err := storage.Open(path, o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	// A graph written without its vectors parses (File.VectorsMissing):
	// the caller gives them as Options.Vectors.
	f, err := faissfmt.OpenWith(s, s.Size(), faissfmt.OpenOptions{AllowNullStorage: true, Window: storage.ParseWindow(path)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	return f, nil
}
