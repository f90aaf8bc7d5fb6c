// Package rerank rescores an HNSW shortlist with full-precision vectors read
// by batched, parallel, block-aligned I/O (see Store for the strategies).
package rerank
