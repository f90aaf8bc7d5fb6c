// Package faissfmt reads FAISS index files without loading them whole.
//
// Open parses a file from an io.ReaderAt: it keeps headers and the small
// arrays in memory and records every large array as a Section (offset,
// length, element size) for a storage backend to read on demand. It follows
// docs/faiss-format.md byte for byte (FAISS 1.7.3 layout, which is
// unchanged through 1.15 for these types) and validates every count against
// the bytes left before allocating anything.
//
// Supported types and what stays on disk:
//
//	float                                   binary
//	IxMp / IxM2  IndexIDMap(2)              IBMp / IBM2  IndexBinaryIDMap(2)
//	├─ header (d, ntotal, metric)           ├─ header (d bits, code_size*, ntotal)
//	├─ child ──────────────┐                ├─ child ──────────────┐
//	└─ id_map   vec<i64>   │ [on disk]      └─ id_map   vec<i64>   │ [on disk]
//	                       ▼                                       ▼
//	IHNf / IHNs  IndexHNSW{Flat,SQ}         IBHf  IndexBinaryHNSW
//	IHc2 / IHNc  IndexHNSWCagra             IBHc  IndexBinaryHNSWCagra
//	├─ header                               ├─ header
//	├─ CAGRA fields (IHc2/IHNc) [RAM]       ├─ CAGRA fields (IBHc) [RAM]
//	├─ assign_probas      vec<f64> [RAM]    ├─ HNSW block (same as float)
//	├─ cum_nneighbor_per_level vec<i32> [RAM]
//	├─ levels    vec<i32>  [streamed once → node table in RAM]
//	├─ offsets   vec<u64>  [streamed once, checked against levels]
//	├─ neighbors vec<i32>  [on disk; the entry point's lists checked at open]
//	├─ entry_point, max_level, efConstruction, efSearch, upper_beam
//	└─ storage ────────────┐                └─ storage ────────────┐
//	   (or "null", below)  ▼                   (or "null")         ▼
//	IxF2 / IxFI / IxFl  IndexFlat           IBxF  IndexBinaryFlat
//	├─ header                               ├─ header
//	└─ codes  ntotal·d float32 [on disk]    └─ codes  ntotal·code_size bytes [on disk]
//	IxSQ  IndexScalarQuantizer
//	├─ header, qtype, rangestat, rangestat_arg, d, code_size
//	├─ trained  vec<f32> (vmin, vdiff) [RAM]
//	└─ codes    ntotal·code_size bytes [on disk]
//
//	* FAISS 1.7.x writes code_size 0 in IBMp/IBM2 headers; accepted.
//
// A file written by OpenSearch's k-NN plugin carries a 16-byte Lucene codec
// footer after the FAISS bytes; Open detects it (File.Footer) and
// CheckFooterCRC (at load), VerifyFooterCRC or Verify check its CRC-32.
//
// The CAGRA fields (Index.CAGRA) precede an ordinary HNSW block, which is
// presented like IHNf's and IBHf's (File.Graph). IHc2's storage is flat for
// numeric type Float32 and an fp16 IxSQ for Float16.
//
// An HNSW written with FAISS's IO_FLAG_SKIP_STORAGE has the 4 bytes "null"
// in place of its storage. Open refuses it; OpenWith with
// OpenOptions.AllowNullStorage accepts it: the graph is parsed as usual,
// Graph.Child is a "null" node, File.Storage is nil and
// File.VectorsMissing() is true.
//
// Other fourccs (IVF, PQ, Panorama, …) are refused with an
// ErrUnsupported error naming the fourcc and its byte offset. All format
// errors are *FormatError values (field, byte offset, message) wrapping
// ErrFormat and one of ErrTruncated, ErrUnsupported, ErrInvalid.
//
// HNSW.CheckNeighbors applies the neighbor-list rules to every list at load
// (as FAISS ≥ 1.14 does on read) and stops at the first violation.
//
// Verify streams the big sections and checks what Open does not read:
// neighbor ids, padding, per-level consistency, IxM2 id uniqueness, finite
// vectors, the footer CRC and (optionally) reachability from the entry point.
//
// A File is immutable after Open and safe for concurrent use.
package faissfmt
