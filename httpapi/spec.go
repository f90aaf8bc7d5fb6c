package httpapi

import (
	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// LoadSpec says how to open an index (the body of PUT /indexes/{name}).
type LoadSpec struct {
	Path string      `json:"path"`
	Mode engine.Mode `json:"mode"` // full | memory_efficient | on_disk
	// Compression is on_disk's guide level: auto (default) or one of quant.Levels.
	Compression string         `json:"compression,omitempty"`
	Backend     engine.Backend `json:"backend"` // memory_efficient: mmap (default), pread, direct, zstd
	SpaceType   string         `json:"space_type"`
	CacheBytes  int64          `json:"cache_bytes"`
	// MemoryBudget (memory_efficient only) applies the bounded-memory
	// policy (hnswsearch.PlanBudget): all the index may hold, counted
	// whole against the node's budget. Backend defaults to direct.
	MemoryBudget int64       `json:"memory_budget"`
	Semantics    string      `json:"semantics"`
	Kernel       string      `json:"kernel"`
	Rerank       *RerankSpec `json:"rerank,omitempty"`
	// EfSearch > 0 serves the index as if its file had been written with
	// this efSearch (FAISS's index.hnsw.efSearch, OpenSearch's index-level
	// ef_search); method_parameters.ef_search still overrides it per query.
	EfSearch int `json:"ef_search,omitempty"`
	// VerifyChecksum checks an OpenSearch file's Lucene footer CRC when the
	// index opens (mode full always does, and checks every neighbor id).
	VerifyChecksum bool `json:"verify_checksum,omitempty"`
	// CAGRASeed seeds a CAGRA graph's random level-0 entry points
	// (base_level_only graphs; 0: the fixed default).
	CAGRASeed uint64 `json:"cagra_seed,omitempty"`
	// VectorsPath is the vector file (.fvecs, .vec, float32 .npy or a
	// FAISS flat file, inside the data roots) of a graph written without
	// its vectors (FAISS's IO_FLAG_SKIP_STORAGE), which needs one.
	VectorsPath string `json:"vectors_path,omitempty"`
}

// RerankSpec configures full-precision rescoring.
type RerankSpec struct {
	VectorsPath      string  `json:"vectors_path"`
	Strategy         string  `json:"strategy"`
	OversampleFactor float64 `json:"oversample_factor"`
}

// engineSpec translates s for the engine, but for paths: Label is s.Path
// and Path is left for the caller to resolve; the rerank spec is not set.
func (s LoadSpec) engineSpec() engine.Spec {
	return engine.Spec{Label: s.Path, Mode: s.Mode, Compression: s.Compression, Backend: s.Backend, CacheBytes: s.CacheBytes,
		MemoryBudget: s.MemoryBudget, Semantics: s.Semantics, Kernel: s.Kernel, EfSearch: s.EfSearch,
		VerifyChecksum: s.VerifyChecksum, SpaceType: s.SpaceType, VectorsLabel: s.VectorsPath, CAGRASeed: s.CAGRASeed}
}

// setEngineSpec takes back the fields an engine.Change may change.
func (s *LoadSpec) setEngineSpec(es engine.Spec) {
	s.Mode, s.Compression, s.Backend, s.CacheBytes, s.MemoryBudget = es.Mode, es.Compression, es.Backend, es.CacheBytes, es.MemoryBudget
	s.EfSearch, s.Semantics, s.Kernel = es.EfSearch, es.Semantics, es.Kernel
}
