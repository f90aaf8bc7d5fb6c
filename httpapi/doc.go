// Package httpapi serves FAISS indexes over a REST API (gin): per-index
// loading modes switched live, a node-wide memory budget, search with
// OpenSearch-style scores and per-query profiles, and Prometheus metrics.
package httpapi
