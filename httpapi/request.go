package httpapi

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// Param is a number request field that tells an absent field (Set false)
// from an explicit null (Set and Null) and a value.
type Param[T int | float64] struct {
	V    T
	Set  bool
	Null bool
}

// UnmarshalJSON reads a number or null (encoding/json calls it for null
// too); anything else is an error.
func (p *Param[T]) UnmarshalJSON(b []byte) error {
	*p = Param[T]{Set: true}
	if string(b) == "null" {
		p.Null = true
		return nil
	}
	return json.Unmarshal(b, &p.V)
}

// IntParam (k) and FloatParam (max_distance, min_score) are the request's
// number fields.
type (
	IntParam   = Param[int]
	FloatParam = Param[float64]
)

// MethodParameters are the HNSW search parameters of a request.
type MethodParameters struct {
	EfSearch int `json:"ef_search"`
}

// IDFilter allows only these external ids.
type IDFilter struct {
	IDs IDList `json:"ids"`
}

// IDList is a filter's ids; a null among them is an error, not id 0.
type IDList []int64

// UnmarshalJSON implements json.Unmarshaler.
func (l *IDList) UnmarshalJSON(b []byte) error {
	ids, err := decodeNonNull[int64](b, "filter.ids", "id")
	*l = ids
	return err
}

// Rescore overrides the index's rerank settings for one request.
type Rescore struct {
	OversampleFactor float64 `json:"oversample_factor"`
}

// SearchRequest is the body of POST /indexes/{targets}/_search, and of
// each search of POST /_msearch.
type SearchRequest struct {
	Vector           Vector            `json:"vector"`
	K                IntParam          `json:"k"`
	MaxDistance      FloatParam        `json:"max_distance"`
	MinScore         FloatParam        `json:"min_score"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Rescore          *Rescore          `json:"rescore"`
	Profile          bool              `json:"profile"`
	// Filters gives named targets each their own allow-list, in place of
	// Filter; an empty one skips that index.
	Filters map[string]*IDFilter `json:"filters"`
	// AllowPartialResults false makes a target's failure the answer of a
	// search of many (absent: true, the others' hits answered with it).
	AllowPartialResults *bool `json:"allow_partial_results"`
}

// filterOf is the allow-list of target name: its own in Filters, else
// Filter (nil: none).
func (r *SearchRequest) filterOf(name string) *IDFilter {
	if f, ok := r.Filters[name]; ok {
		return f
	}
	return r.Filter
}

// checkFilters refuses a Filters key that names none of the search's
// targets (isTarget), the first in name order.
func (r *SearchRequest) checkFilters(isTarget func(string) bool) error {
	for _, k := range slices.Sorted(maps.Keys(r.Filters)) {
		if !isTarget(k) {
			return badRequest("filters names %s, which is not one of the indexes this search targets", quoteName(k))
		}
	}
	return nil
}

// MSearchRequest is the body of POST /indexes/{name}/_msearch.
type MSearchRequest struct {
	Vectors          []Vector          `json:"vectors"`
	K                IntParam          `json:"k"`
	MaxDistance      FloatParam        `json:"max_distance"`
	MinScore         FloatParam        `json:"min_score"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Rescore          *Rescore          `json:"rescore"`
	Profile          bool              `json:"profile"`
}

// Hit is one search result; Profile a query's search statistics and I/O.
type (
	Hit     = engine.Hit
	Profile = engine.Profile
)

// queryPlan is a request's validated parameters, shared by its queries.
type queryPlan = engine.QueryPlan

// radial is a request's max_distance and min_score: a radial query when
// one is set (in place of k).
type radial struct{ maxDistance, minScore FloatParam }

// plan validates a request's k (or max_distance / min_score), ef_search,
// filter and rescore against h and the limits, before anything is
// allocated by them.
func (s *Server) plan(h *handle, k IntParam, rad radial, mp *MethodParameters, filter *IDFilter, rs *Rescore) (queryPlan, error) {
	r := engine.Request{K: k.V, MaxEfSearch: s.limits.MaxEfSearch, MaxResults: s.limits.MaxRadialResults}
	md, ms := rad.maxDistance, rad.minScore
	n := 0
	for _, set := range []bool{k.Set, md.Set, ms.Set} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return queryPlan{}, badRequest("give exactly one of k, max_distance and min_score")
	case md.Null:
		return queryPlan{}, badRequest("max_distance is null; give a number or use k or min_score")
	case ms.Null:
		return queryPlan{}, badRequest("min_score is null; give a number or use k or max_distance")
	case md.Set: // a variable of its own, so that only a radial request allocates its bound
		v := md.V
		r.MaxDistance = &v
	case ms.Set:
		v := ms.V
		r.MinScore = &v
	case !k.Set:
		r.K = DefaultK
	case k.Null:
		return queryPlan{}, badRequest("k is null; give a number in [1, %d] or leave k out (default %d)", engine.MaxK, DefaultK)
	}
	if mp != nil {
		r.EfSearch, r.EfSearchSet = mp.EfSearch, true
	}
	if filter != nil {
		r.Filter = filter.IDs
		if r.Filter == nil {
			r.Filter = []int64{}
		}
	}
	if rs != nil {
		// The engine takes a negative factor as "skip the rescoring"; over
		// REST that would return an on_disk index's estimated distances as
		// if they were exact, so it is refused.
		if rs.OversampleFactor < 0 {
			return queryPlan{}, badRequest("rescore.oversample_factor %g is negative (0 or absent: the index's)", rs.OversampleFactor)
		}
		r.Rescore = &engine.Rescore{Oversample: rs.OversampleFactor}
	}
	return h.x.Plan(r)
}
