package main

import (
	"errors"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// Flag values are checked before a command opens or reads anything; a bad
// one is a usage error (exit status 2). The rules themselves live with the
// code they protect (engine.CheckSpec, engine.Request.Check, …); specFlags
// words the engine's field errors with the flags' names.

// queryRequest is the engine's request for --k and --ef-search (0: the
// index's). A binary index with rerank vectors rescores with the float
// queries of --rerank-queries.
func queryRequest(k, ef int) engine.Request {
	return engine.Request{K: k, EfSearch: ef, EfSearchSet: ef != 0, RescoreBinary: true}
}

// checkRequest refuses a request by the rule every query is held to
// (engine.Request.Check), as a usage error, before anything is opened.
func checkRequest(r engine.Request) error {
	if err := r.Check(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// specFlags names the engine's load spec fields by the flags that set them.
var specFlags = map[string]string{
	"mode": "--mode", "backend": "--backend", "semantics": "--semantics", "kernel": "--kernel",
	"cache_bytes": "--cache-bytes", "cache_block": "--cache-block", "memory_budget": "--memory-budget",
	"exact_filter_max": "--exact-filter-max", "ef_search": "--index-ef-search",
	"rerank.strategy": "--rerank-strategy", "rerank.oversample_factor": "--oversample", "rerank.metric": "--rerank-metric",
	"vectors_path": "--vectors", "cache_dir_bytes": "--cache-dir-bytes", "guide_dir": "--guide-dir",
}

// specError turns an engine bad-spec error into a usage error naming the
// flags (engine.FieldError) and without partial's prefix; other errors
// pass through.
func specError(err error) error {
	var fe *engine.FieldError
	switch {
	case errors.As(err, &fe):
		return badOption(errors.New(fe.Message(func(f string) string { return specFlags[f] })))
	case errors.Is(err, engine.ErrBadSpec):
		return badOption(err)
	}
	return err
}

// validate checks the names and sizes of the index flags by the engine's
// rules (engine.CheckSpec).
func (f *indexFlags) validate() error {
	if err := engine.CheckSpec(f.spec("", nil)); err != nil {
		return specError(err)
	}
	return nil
}

// validate checks the rerank flags' names and sizes by the engine's rules,
// whether or not --rerank-vectors is given.
func (f *rerankFlags) validate() error {
	if err := engine.CheckSpec(engine.Spec{Rerank: f.spec()}); err != nil {
		return specError(err)
	}
	return nil
}

// badOption turns an engine.ErrBadStorageOption into a usage error,
// without the kind's prefix.
func badOption(err error) error {
	return usagef("%s", strings.TrimPrefix(err.Error(), engine.ErrBadStorageOption.Error()+": "))
}

// checkBackend checks a --backend name ("" or "auto": chosen by the file).
func checkBackend(b string) error {
	if err := engine.CheckBackend(b); err != nil {
		return badOption(err)
	}
	return nil
}
