// Package hnswsearch runs FAISS's HNSW search over a file parsed by
// faissfmt whose bytes a partial.Storage serves, and returns what FAISS
// returns: the same ids in the same order, and with the exact kernel the
// same distances bit for bit.
//
// New binds, once per index, the distance kernel and the way neighbor
// lists and vectors are reached (zero-copy views, pinned memory, cached
// blocks, batched reads); Search and SearchBinary then allocate nothing
// per query. Two behaviours are selectable: FAISS 1.7.3 with its quirks,
// and modern FAISS (1.8 – 1.14.2, what OpenSearch bundles). The algorithm,
// step by step, is docs/hnsw-search.md, whose section numbers the comments
// here cite.
//
// PlanBudget and Options.HeldBytes implement the bounded-memory policy
// (docs/design.md, "Memory"). Every query also checks, after its last read,
// that the file it read is still the one opened (filecheck.go).
//
// An Index is immutable and safe for concurrent use.
package hnswsearch
