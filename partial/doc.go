// Package partial is read-only random access to one file's bytes, without
// loading the file whole: the storage contract and the backends that read
// a file as it is on disk.
//
// Storage is ReadAtContext + Size + Close, with no short reads, a caller's
// I/O tally, reads that give up when their context ends, and safe
// concurrent use, Close included; ReaderAt binds a context to a Storage for
// code that takes an io.ReaderAt. The backends here are Memory (the whole
// file in RAM), Mmap, File (pread) and Direct (O_DIRECT through io_uring).
// What only some backends can do is an optional interface found by type
// assertion: Viewer, BatchReader, BlockViewer, Warmer, FileChecker.
//
// Every storage that reads a file as it is on disk detects a change of that
// file after it was opened (FileChecker, ErrFileChanged, RecoverFault), so
// a reader can refuse to answer from a mix of two versions' bytes.
//
// The subpackages build on this one: blockcache (a block cache in front of
// any Storage), zstd (the seekable zstd format and its backend), s3 (an
// object in S3-compatible storage, s3://BUCKET/KEY, by ranged GETs),
// recordcache (fixed-size records off the Go heap) and storage (Open, which
// picks a backend by name). The package knows nothing of FAISS; the design
// is in docs/design.md; partialtest is the conformance suite every backend
// passes.
package partial
