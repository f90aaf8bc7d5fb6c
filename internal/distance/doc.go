// Package distance computes the distances FAISS's HNSW search uses, over
// vectors stored as little-endian bytes (FAISS sections are unaligned, so
// nothing here assumes alignment).
//
// Exact kernels reproduce the Debian FAISS 1.7.3 (GENERIC) build bit for
// bit: strictly sequential float32 with every operation rounded and no FMA
// (docs/hnsw-search.md §2, §10). Fast kernels reassociate (several accumulators
// or SIMD) and may differ in the last bits.
package distance
