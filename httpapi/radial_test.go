package httpapi

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const faiss115 = "../testdata/faiss115"

// radialFixture is FAISS 1.15's range_hnsw_flat_l2: its range runs and
// the filter, with the first queries as JSON arrays.
type radialFixture struct {
	testfixtures.FAISS115
	queries []string
}

func loadRadialFixture(t *testing.T) radialFixture {
	t.Helper()
	f, err := testfixtures.Load115(faiss115, "range_hnsw_flat_l2")
	require.NoError(t, err)
	fx := radialFixture{FAISS115: f}
	for _, q := range f.QF[:5] {
		fx.queries = append(fx.queries, vectorJSON(testfixtures.Float64s(q)))
	}
	return fx
}

// ids reads a response's hits' ids.
func hitIDs(t *testing.T, hits any) []int64 {
	var out []int64
	for _, h := range hits.([]any) {
		out = append(out, int64(h.(map[string]any)["id"].(float64)))
	}
	return out
}

// TestRadialSearchREST: _search and _msearch with max_distance (and a
// filter) return FAISS 1.15's range results, sorted by score then id, with
// "truncated"; min_score answers too; a lower max_radial_results cuts the
// hits and says so.
func TestRadialSearchREST(t *testing.T) {
	fx := loadRadialFixture(t)
	abs, err := filepath.Abs(faiss115)
	require.NoError(t, err)
	s, ts := newTestServer(t, Config{DataRoots: []string{abs}})
	require.NoError(t, s.Reg.Load("r", LoadSpec{Path: "range_hnsw_flat_l2.faiss"}))
	for ri, run := range fx.Range {
		filter := ""
		if run.Filtered {
			ids, _ := json.Marshal(fx.Filter.IDs)
			filter = `,"filter":{"ids":` + string(ids) + `}`
		}
		params := fmt.Sprintf(`"max_distance":%v,"method_parameters":{"ef_search":%d}%s`, run.Radius, run.EfSearch, filter)
		for qi, q := range fx.queries {
			r := call(t, ts, "POST", "/indexes/r/_search", `{"vector":`+q+`,`+params+`}`)
			require.Equal(t, 200, r.Status, r.Raw)
			assert.Equal(t, false, r.Body["truncated"])
			got := hitIDs(t, r.Body["hits"])
			assert.ElementsMatch(t, run.IDs[run.Lims[qi]:run.Lims[qi+1]], got, "run %d query %d", ri, qi)
			hits := r.Body["hits"].([]any)
			for j := 1; j < len(hits); j++ {
				a, b := hits[j-1].(map[string]any), hits[j].(map[string]any)
				require.True(t, a["score"].(float64) > b["score"].(float64) || a["score"] == b["score"] && a["id"].(float64) < b["id"].(float64))
			}
		}
		vs := fx.queries[0]
		for _, q := range fx.queries[1:] {
			vs += "," + q
		}
		r := call(t, ts, "POST", "/indexes/r/_msearch", `{"vectors":[`+vs+`],`+params+`}`)
		require.Equal(t, 200, r.Status, r.Raw)
		for qi, o := range r.Body["responses"].([]any) {
			m := o.(map[string]any)
			assert.Equal(t, false, m["truncated"])
			assert.ElementsMatch(t, run.IDs[run.Lims[qi]:run.Lims[qi+1]], hitIDs(t, m["hits"]), "_msearch run %d query %d", ri, qi)
		}
	}
	// min_score 0.15: squared distance < 1/0.15 − 1 ≈ 5.67.
	r := call(t, ts, "POST", "/indexes/r/_search", `{"vector":`+fx.queries[0]+`,"min_score":0.15}`)
	require.Equal(t, 200, r.Status, r.Raw)
	require.NotEmpty(t, r.Body["hits"])
	for _, h := range r.Body["hits"].([]any) {
		require.Greater(t, h.(map[string]any)["score"].(float64), 0.15)
	}
	// A k-NN answer has no "truncated".
	r = call(t, ts, "POST", "/indexes/r/_search", `{"vector":`+fx.queries[0]+`,"k":3}`)
	require.Equal(t, 200, r.Status, r.Raw)
	require.NotContains(t, r.Body, "truncated")

	// max_radial_results 3: the first 3 FAISS evaluated, truncated.
	s2, ts2 := newTestServer(t, Config{DataRoots: []string{abs}, Limits: Limits{MaxRadialResults: 3}})
	require.NoError(t, s2.Reg.Load("r", LoadSpec{Path: "range_hnsw_flat_l2.faiss"}))
	run := fx.Range[4]
	require.False(t, run.Filtered)
	r = call(t, ts2, "POST", "/indexes/r/_search", fmt.Sprintf(`{"vector":%s,"max_distance":%v,"method_parameters":{"ef_search":%d}}`, fx.queries[0], run.Radius, run.EfSearch))
	require.Equal(t, 200, r.Status, r.Raw)
	require.Greater(t, run.Lims[1], 3)
	assert.Equal(t, true, r.Body["truncated"])
	assert.ElementsMatch(t, run.IDs[:3], hitIDs(t, r.Body["hits"]))
}

// TestRadialSearchRefusals: exactly one of k, max_distance and min_score;
// null, negative, NaN-like and huge values, rescore, and radial work past
// max_request_work are 400s naming the problem.
func TestRadialSearchRefusals(t *testing.T) {
	fx := loadRadialFixture(t)
	abs, err := filepath.Abs(faiss115)
	require.NoError(t, err)
	s, ts := newTestServer(t, Config{DataRoots: []string{abs}, Limits: Limits{MaxRequestWork: 20000}})
	require.NoError(t, s.Reg.Load("r", LoadSpec{Path: "range_hnsw_flat_l2.faiss"}))
	q := fx.queries[0]
	for _, c := range []struct{ body, want string }{
		{`{"vector":` + q + `,"k":3,"max_distance":1}`, "exactly one of k, max_distance and min_score"},
		{`{"vector":` + q + `,"max_distance":1,"min_score":0.5}`, "exactly one of k, max_distance and min_score"},
		{`{"vector":` + q + `,"max_distance":null}`, "max_distance is null"},
		{`{"vector":` + q + `,"min_score":null}`, "min_score is null"},
		{`{"vector":` + q + `,"max_distance":-1}`, "negative"},
		{`{"vector":` + q + `,"max_distance":1e39}`, "not a finite float32"},
		{`{"vector":` + q + `,"max_distance":1e400}`, ""},
		{`{"vector":` + q + `,"max_distance":NaN}`, ""},
		{`{"vector":` + q + `,"max_distance":"1"}`, ""},
		{`{"vector":` + q + `,"min_score":0}`, "min_score"},
		{`{"vector":` + q + `,"min_score":2}`, "above 1"},
		{`{"vector":` + q + `,"max_distance":1,"rescore":{"oversample_factor":2}}`, "rescore does not apply"},
		{`{"vector":` + q + `,"max_distance":1,"method_parameters":{"ef_search":0}}`, "ef_search"},
	} {
		r := call(t, ts, "POST", "/indexes/r/_search", c.body)
		require.Equal(t, 400, r.Status, "%s: %s", c.body, r.Raw)
		assert.Contains(t, r.Raw, c.want, c.body)
	}
	// The cap (10000) counts as k: 3 radial queries are 30000 > 20000.
	r := call(t, ts, "POST", "/indexes/r/_msearch", `{"vectors":[`+q+`,`+q+`,`+q+`],"max_distance":5}`)
	require.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "max_request_work")
	r = call(t, ts, "POST", "/indexes/r/_msearch", `{"vectors":[`+q+`,`+q+`],"max_distance":5}`)
	require.Equal(t, 200, r.Status, r.Raw)
}
