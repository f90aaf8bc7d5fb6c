// Package partial is read-only random access to one file's bytes, without
// loading the file whole: the storage backends behind an index.
//
// Storage is io.ReaderAt + Size + Close, with no short reads and safe
// concurrent use, Close included. Open picks a backend by name: memory (the
// whole file in RAM), mmap, pread (behind a block Cache), direct (O_DIRECT
// through io_uring, a Cache optional) and zstd (the seekable format
// CompressSeekable writes). What only some backends can do is an optional interface found
// by type assertion: Viewer, BatchReader, TallyReader, BlockViewer, Warmer,
// FileChecker. RecordCache keeps fixed-size records
// (vectors) outside the Go heap.
//
// Every storage that reads a file as it is on disk detects a change of that
// file after it was opened (FileChecker, ErrFileChanged, RecoverFault), so
// a reader can refuse to answer from a mix of two versions' bytes.
//
// The package knows nothing of FAISS. Backends and caches are described in
// docs/design.md; partialtest is the conformance suite every backend passes.
package partial
