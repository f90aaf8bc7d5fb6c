// Package hnswsearch runs FAISS's HNSW search over a file parsed by
// faissfmt whose bytes a partial.Storage serves, and returns what FAISS
// returns: the same ids in the same order, and with the exact kernel the
// same distances bit for bit.
//
// New chooses, once per index, where neighbor lists come from (a
// listSource: the section viewed in place, pinned lists, reads through the
// block cache) and where vectors come from (a vectorSource: bytes in
// memory, cached blocks, the vector cache with batched reads, plain reads),
// and binds the distance function for the code kind and kernel; the search
// loops (search.go) call those and nothing else. Search and SearchBinary
// allocate nothing per query. Two behaviours are selectable: FAISS 1.7.3 with its quirks,
// and modern FAISS (1.8 – 1.14.2, what OpenSearch bundles). The algorithm,
// step by step, is docs/hnsw-search.md, whose section numbers the comments
// here cite.
//
// The bounded-memory policy is budget.go: PlanBudget splits a budget
// between the Go heap, a block cache and Options.HeldBytes, which planHeld
// splits between pinned lists, pinned vectors and the vector cache
// (pinned.go holds them; docs/design.md, "Memory"). Every query also checks, after its last read,
// that the file it read is still the one opened (filecheck.go).
//
// An Index is immutable and safe for concurrent use.
package hnswsearch
