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
// each search of POST /_msearch. Its vector is Vector or VectorB64, never
// both (checkDecoded); query gives it.
type SearchRequest struct {
	Vector           Vector            `json:"vector"`
	VectorB64        VectorB64         `json:"vector_b64"`
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

// MSearchRequest is the body of POST /indexes/{name}/_msearch. Its
// vectors are Vectors or VectorsB64, never both (checkDecoded); count and
// query give them.
type MSearchRequest struct {
	Vectors          []Vector          `json:"vectors"`
	VectorsB64       VectorsB64        `json:"vectors_b64"`
	K                IntParam          `json:"k"`
	MaxDistance      FloatParam        `json:"max_distance"`
	MinScore         FloatParam        `json:"min_score"`
	MethodParameters *MethodParameters `json:"method_parameters"`
	Filter           *IDFilter         `json:"filter"`
	Rescore          *Rescore          `json:"rescore"`
	Profile          bool              `json:"profile"`
}

// checkDecoded refuses a body that gave both vector and vector_b64;
// decodeJSON calls it once the body has decoded (the fast parser declines
// such a body). Vector is nil when the field was absent: decode hands
// encoding/json a request with no array to reuse.
func (r *SearchRequest) checkDecoded() error {
	if r.Vector != nil && r.VectorB64.set {
		return errBothVectors("vector", "vector_b64")
	}
	return nil
}

// query is the request's vector.
func (r *SearchRequest) query() query {
	if r.VectorB64.set {
		return query{b64: &r.VectorB64, i: -1}
	}
	return query{vec: r.Vector}
}

// checkDecoded is SearchRequest's for vectors and vectors_b64.
func (r *MSearchRequest) checkDecoded() error {
	if r.Vectors != nil && r.VectorsB64 != nil {
		return errBothVectors("vectors", "vectors_b64")
	}
	return nil
}

// count is the number of the request's vectors.
func (r *MSearchRequest) count() int { return max(len(r.Vectors), len(r.VectorsB64)) }

// query is the request's vector i (< count).
func (r *MSearchRequest) query(i int) query {
	if r.VectorsB64 != nil {
		return query{b64: &r.VectorsB64[i], i: i}
	}
	return query{vec: r.Vectors[i]}
}

func errBothVectors(dec, b64 string) error {
	return badRequest("give %s or %s, not both", dec, b64)
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
