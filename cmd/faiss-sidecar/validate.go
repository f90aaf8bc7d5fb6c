package main

import (
	"slices"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// Flag values are checked before a command opens or reads anything; a bad
// one is a usage error (exit status 2). The rules themselves live with the
// code they protect (hnswsearch.Params.Validate, engine.ModeBackend, …).

// checkQuery checks --k and --ef-search (0: the index's) by the rule
// every query is held to.
func checkQuery(k, ef int) error {
	if err := engine.CheckQuery(k, ef, ef != 0, 0); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// validate checks the names and sizes of the index flags.
func (f *indexFlags) validate() error {
	// The path only picks a default backend; the names are checked without it.
	if _, err := engine.ModeBackend(f.mode, f.backend, ""); err != nil {
		return badOption(err)
	}
	if _, err := hnswsearch.ParseSemantics(f.semantics); err != nil {
		return usagef("%v", err)
	}
	if _, err := hnswsearch.ParseKernel(f.kernel); err != nil {
		return usagef("%v", err)
	}
	if err := partial.CheckBlockSize(f.cacheBlock); err != nil {
		return badOption(err)
	}
	switch {
	case f.cacheBytes < 0:
		return usagef("--cache-bytes %d is negative", f.cacheBytes)
	case f.memoryBudget < 0:
		return usagef("--memory-budget %d is negative", f.memoryBudget)
	case f.memoryBudget > 0 && f.mode != "memory_efficient":
		return usagef("--memory-budget applies to --mode memory_efficient")
	case f.exactFilterMax < -1:
		return usagef("--exact-filter-max %d: use a count ≥ 0, or -1 for k only", f.exactFilterMax)
	}
	return nil
}

// validate checks the rerank flags' names and sizes.
func (f *rerankFlags) validate() error {
	switch {
	case f.oversample < 0:
		return usagef("--oversample %g is negative", f.oversample)
	case !slices.Contains(rerank.Strategies, f.strategy):
		return usagef("unknown --rerank-strategy %q (known: %s)", f.strategy, strings.Join(rerank.Strategies, ", "))
	case f.metric != "" && f.metric != "l2" && f.metric != "ip":
		return usagef("unknown --rerank-metric %q (known: l2, ip)", f.metric)
	}
	return nil
}

// badOption turns a partial.ErrBadOption into a usage error, without the
// package's prefix.
func badOption(err error) error {
	return usagef("%s", strings.TrimPrefix(err.Error(), partial.ErrBadOption.Error()+": "))
}

// checkBackend checks a --backend name ("" or "auto": chosen by the file).
func checkBackend(b string) error {
	if b != "" && b != "auto" && !slices.Contains(partial.Backends, b) {
		return usagef("unknown backend %q (known: %s)", b, strings.Join(partial.Backends, ", "))
	}
	return nil
}
