// Package engine is the one load pipeline and the one query pipeline both
// front ends (cmd/faiss-sidecar and httpapi) serve an index through: a Spec
// is checked and planned (Prepare: the file opened once, its kind,
// backend, probe, memory budget, what the load will hold) without
// committing memory, then opened (Plan.Open: storage built on that open
// file, search index, rerank vectors, space type); an Index answers
// queries through one pipeline (Plan, then Search, whose answer is in
// FAISS's shape, the command line's; Query puts it in the REST API's),
// warms, reports and checks its files. The front ends translate flags and
// JSON into these and back; every default and limit of loading and
// querying lives here or in the package it names.
package engine
