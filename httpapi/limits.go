package httpapi

import (
	"fmt"
	"runtime"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// Limits bound what requests may ask of the server, so that no request can
// take more memory or time than an operator allowed. Zero fields take the
// defaults of withDefaults, which is where every default lives.
type Limits struct {
	// MaxEfSearch bounds method_parameters.ef_search and an index's
	// ef_search (default 100000; engine.MaxEfSearch at most).
	MaxEfSearch int `json:"max_ef_search"`
	// MaxRadialResults caps a radial query's hits (max_distance or
	// min_score), as OpenSearch's index.knn.max_radial_search_results
	// does (default engine.DefaultMaxRadialResults; at most
	// engine.MaxRangeResults); it counts as k in MaxRequestWork.
	MaxRadialResults int `json:"max_radial_results"`
	// MaxMsearchVectors bounds the vectors of one _msearch (default 1000).
	MaxMsearchVectors int `json:"max_msearch_vectors"`
	// MaxRequestWork bounds the sum, over a request's queries, of
	// max(candidates kept, ef_search): what the result pools hold and,
	// roughly, the distances computed, and bounds the hits a response
	// holds (default defaultRequestWork: 1048576, about 80 MB of hits and
	// their JSON, from a 2 GiB machine up).
	MaxRequestWork int64 `json:"max_request_work"`
	// MaxConcurrentSearches is how many _search/_msearch requests run at
	// once (default 4 per core, at least 16); MaxQueuedSearches how many
	// more wait for a slot (default 4 × MaxConcurrentSearches). Past both,
	// requests are shed with 429 and Retry-After.
	MaxConcurrentSearches int `json:"max_concurrent_searches"`
	MaxQueuedSearches     int `json:"max_queued_searches"`
	// MaxWorkInFlight bounds the work (as MaxRequestWork counts it) of all
	// searches running at once (default 2 × MaxRequestWork); past it a
	// request is shed with 429. MaxBodiesInFlight bounds the bytes of
	// request bodies being read or held at once (default engine.OwnShare:
	// 64 MiB on a machine or cgroup of 1 GiB or more, less on a smaller
	// one), so slow or large bodies cannot add up; they are read before a
	// search slot is taken.
	MaxWorkInFlight   int64 `json:"max_work_in_flight"`
	MaxBodiesInFlight int64 `json:"max_bodies_in_flight"`
	// HeavyQueryWork is the effort of one query (max(k or shortlist,
	// ef_search); a radial query's ef_search) from which on it is heavy
	// (default 8192): a walk of a large part of the graph, or a long rerank. Heavy searches run in a
	// lane of their own, MaxHeavySearches at once (default one per core)
	// with as many more waiting, one core each (no extra _msearch
	// workers), so a flood of them cannot take the slots cheap searches
	// need; past the lane's queue they are shed with 429.
	HeavyQueryWork   int64 `json:"heavy_query_work"`
	MaxHeavySearches int   `json:"max_heavy_searches"`
	// MaxVerifyQueries bounds a mode switch's verify_queries (default 1000).
	MaxVerifyQueries int `json:"max_verify_queries"`
	// MaxConnections bounds the client connections open at once (default
	// one share of the server's own memory at 32 KiB a connection: 2048
	// from a 1 GiB machine up, 256 on the smallest); more wait in the
	// kernel's accept queue, and while one does, connections held between
	// requests give their slots up to it (connLimiter). An idle connection costs about 19 KB (its
	// goroutine's stack and buffers), and connections opened faster than
	// the header timeout closes them would otherwise exhaust a small
	// server's memory.
	MaxConnections int `json:"max_connections"`
	// MinBodyRate is the slowest a request body may arrive, in bytes a
	// second after its first second (default 262144); a slower one is cut
	// off with 408. A body is charged to MaxBodiesInFlight as it arrives,
	// so without it a few clients trickling bytes could hold the whole
	// allowance until the request timeout, and every search would get 429.
	MinBodyRate int64 `json:"min_body_rate"`
	// MaxOpenFiles bounds the file descriptors the served indexes hold
	// open together (handleFiles: one per file, four with direct I/O, none
	// in mode full once read; one for any local file while it loads); a
	// load past it is refused (admitFiles). Default: the process's
	// descriptor limit less MaxConnections, ownFiles and a disk cache's
	// block files, at least a quarter of the limit (defaultOpenFiles).
	MaxOpenFiles int64 `json:"max_open_files"`
	// SwitchTimeout bounds a mode switch: open, warm-up and check queries
	// (default 5 minutes). A switch past it is abandoned; the old mode
	// keeps serving.
	SwitchTimeout time.Duration `json:"-"`
}

// Check refuses negative limits (zero means the default).
func (l Limits) Check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"max_ef_search", int64(l.MaxEfSearch)}, {"max_radial_results", int64(l.MaxRadialResults)}, {"max_msearch_vectors", int64(l.MaxMsearchVectors)},
		{"max_request_work", l.MaxRequestWork}, {"max_concurrent_searches", int64(l.MaxConcurrentSearches)},
		{"max_work_in_flight", l.MaxWorkInFlight}, {"max_bodies_in_flight", l.MaxBodiesInFlight},
		{"max_queued_searches", int64(l.MaxQueuedSearches)}, {"max_verify_queries", int64(l.MaxVerifyQueries)},
		{"max_connections", int64(l.MaxConnections)}, {"min_body_rate", l.MinBodyRate},
		{"heavy_query_work", l.HeavyQueryWork}, {"max_heavy_searches", int64(l.MaxHeavySearches)}, {"max_open_files", l.MaxOpenFiles},
		{"switch_timeout", int64(l.SwitchTimeout)}} {
		if f.v < 0 {
			return fmt.Errorf("%s %d is negative (0: the default)", f.name, f.v)
		}
	}
	if l.MaxEfSearch > engine.MaxEfSearch {
		return fmt.Errorf("max_ef_search %d is above %d", l.MaxEfSearch, engine.MaxEfSearch)
	}
	if l.MaxRadialResults > engine.MaxRangeResults {
		return fmt.Errorf("max_radial_results %d is above %d", l.MaxRadialResults, engine.MaxRangeResults)
	}
	return nil
}

// defaultRequestWork is MaxRequestWork's default on a machine (or cgroup)
// of total bytes (0: unknown): 1,048,576 (about 80 MB of hits) from 2 GiB
// up, a 2048th of the machine below (80 bytes a unit: twice that, the
// work in flight, is a sixteenth of it, the heap's slack share), at least
// 4096. A small machine needs the smaller bound: one search at the
// limits (k 10000, ef_search 100000) or a flood of _msearch requests must
// fit beside everything else.
func defaultRequestWork(total int64) int64 {
	if total <= 0 {
		return 1 << 20
	}
	return min(max(total/2048, 4096), 1<<20)
}

// connectionBytes is what MaxConnections' default allows a connection.
const connectionBytes = 32 << 10

// DefaultK is the k of a search request that does not name one.
const DefaultK = engine.DefaultK

// withDefaults fills the zero fields for a machine (or memory cgroup) of
// total bytes (0: unknown).
func (l Limits) withDefaults(total int64) Limits {
	if l.MaxEfSearch <= 0 || l.MaxEfSearch > engine.MaxEfSearch {
		l.MaxEfSearch = min(100000, engine.MaxEfSearch)
	}
	if l.MaxRadialResults <= 0 || l.MaxRadialResults > engine.MaxRangeResults {
		l.MaxRadialResults = engine.DefaultMaxRadialResults
	}
	if l.MaxMsearchVectors <= 0 {
		l.MaxMsearchVectors = 1000
	}
	if l.MaxRequestWork <= 0 {
		l.MaxRequestWork = defaultRequestWork(total)
	}
	if l.MaxWorkInFlight <= 0 {
		l.MaxWorkInFlight = 2 * l.MaxRequestWork
	}
	if l.MaxBodiesInFlight <= 0 {
		l.MaxBodiesInFlight = engine.OwnShare(total)
	}
	if l.MaxConcurrentSearches <= 0 {
		l.MaxConcurrentSearches = max(16, 4*runtime.GOMAXPROCS(0))
	}
	if l.MaxQueuedSearches <= 0 {
		l.MaxQueuedSearches = 4 * l.MaxConcurrentSearches
	}
	if l.MaxVerifyQueries <= 0 {
		l.MaxVerifyQueries = 1000
	}
	if l.MinBodyRate <= 0 {
		l.MinBodyRate = 256 << 10
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = int(engine.OwnShare(total) / connectionBytes)
	}
	if l.HeavyQueryWork <= 0 {
		l.HeavyQueryWork = 8192
	}
	if l.MaxHeavySearches <= 0 {
		l.MaxHeavySearches = runtime.GOMAXPROCS(0)
	}
	if l.MaxOpenFiles <= 0 {
		l.MaxOpenFiles = defaultOpenFiles(processFiles(), l.MaxConnections, 0)
	}
	if l.SwitchTimeout <= 0 {
		l.SwitchTimeout = 5 * time.Minute
	}
	return l
}
