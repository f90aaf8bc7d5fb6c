package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/segments holds two OpenSearch-style shards, one FAISS file per
// segment, with FAISS's own answers per segment (segments.json, written by
// testdata/gen_segments.py): the merged answers are computed here from
// those, by the documented rule, not by the server's code.

const segmentsDir = "../testdata/segments"

// segShard is one shard of segments.json.
type segShard struct {
	Metric     string                `json:"metric"`
	D          int                   `json:"d"`
	EfSearch   int                   `json:"ef_search"`
	Queries    [][]float64           `json:"queries"`
	MergedFrom []int                 `json:"merged_from"`
	Segments   map[string]segAnswers `json:"segments"`
}

// segAnswers is FAISS's answers of one segment (ids are its doc ids).
type segAnswers struct {
	NTotal   int         `json:"ntotal"`
	DocIDs   []int64     `json:"doc_ids"`
	Allow    []int64     `json:"allow"`
	K10      faissAnswer `json:"k10"`
	K10Allow faissAnswer `json:"k10_allow"`
}

type faissAnswer struct {
	IDs       [][]int64   `json:"ids"`
	Distances [][]float64 `json:"distances"`
}

func loadSegments(t testing.TB) map[string]segShard {
	raw, err := os.ReadFile(filepath.Join(segmentsDir, "segments.json"))
	require.NoError(t, err)
	var out map[string]segShard
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// segFile is segment i's file of shard, relative to ../testdata.
func segFile(shard string, i int) string {
	return fmt.Sprintf("segments/%s/_%d_165_my_vector.faiss", shard, i)
}

// segKey is segment i's key in segments.json.
func segKey(i int) string { return fmt.Sprintf("_%d_165_my_vector", i) }

// newSegmentServer serves ../testdata (segments and fixtures), and the
// roots in cfg after it, with cfg.
func newSegmentServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	abs, err := filepath.Abs("../testdata")
	require.NoError(t, err)
	cfg.DataRoots = append([]string{abs}, cfg.DataRoots...)
	return newTestServer(t, cfg)
}

// loadSegment serves segment i of shard as name, searched as FAISS 1.7.3
// searched it.
func loadSegment(t *testing.T, ts *httptest.Server, name, shard string, i int) {
	t.Helper()
	r := call(t, ts, "PUT", "/indexes/"+name, fmt.Sprintf(`{"path":%q,"mode":"full","semantics":"faiss-1.7.3","kernel":"exact"}`, segFile(shard, i)))
	require.Equal(t, 200, r.Status, r.Raw)
}

// wantHit is a hit of a merged answer.
type wantHit struct {
	Index    string  `json:"_index"`
	ID       int64   `json:"id"`
	Distance float64 `json:"distance"`
	Score    float64 `json:"score"`
}

// scoreOf is OpenSearch's score of a FAISS distance, as rest-api.md gives it.
func scoreOf(space string, d float32) float64 {
	v := float64(d)
	if space == "innerproduct" {
		if v <= 0 {
			return 1 / (1 - v)
		}
		return v + 1
	}
	return 1 / (1 + v)
}

// perIndex is one index's answer to one query, best first.
type perIndex struct {
	ids  []int64
	dist []float64
}

// mergeWant merges per-index answers by the documented rule: score
// descending, then the indexes' name order, then each index's own order;
// k < 0 keeps all. It does not use engine.MergeHits.
func mergeWant(space string, per map[string]perIndex, k int) []wantHit {
	type cand struct {
		wantHit
		rank int
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range per {
			if !yield(n) {
				return
			}
		}
	})
	var all []cand
	for _, n := range names {
		a := per[n]
		for r, id := range a.ids {
			d := float32(a.dist[r])
			all = append(all, cand{wantHit{n, id, float64(d), scoreOf(space, d)}, r})
		}
	}
	slices.SortFunc(all, func(a, b cand) int {
		switch {
		case a.Score != b.Score:
			if a.Score > b.Score {
				return -1
			}
			return 1
		case a.Index != b.Index:
			return strings.Compare(a.Index, b.Index)
		}
		return a.rank - b.rank
	})
	out := []wantHit{}
	for _, c := range all {
		if k >= 0 && len(out) == k {
			break
		}
		out = append(out, c.wantHit)
	}
	return out
}

// multiAnswer is the answer of a search of many indexes.
type multiAnswer struct {
	Took   float64 `json:"took"`
	Shards struct {
		Total      int `json:"total"`
		Successful int `json:"successful"`
		Skipped    int `json:"skipped"`
		Failed     int `json:"failed"`
		Failures   []struct {
			Index  string `json:"index"`
			Reason struct {
				Type   string `json:"type"`
				Reason string `json:"reason"`
			} `json:"reason"`
			Status int `json:"status"`
		} `json:"failures"`
	} `json:"_shards"`
	Hits      []wantHit `json:"hits"`
	Truncated *bool     `json:"truncated"`
}

// searchMulti posts body to /indexes/{targets}/_search and decodes a 200.
func searchMulti(t *testing.T, ts *httptest.Server, targets, body string) multiAnswer {
	t.Helper()
	r := call(t, ts, "POST", "/indexes/"+targets+"/_search", body)
	require.Equal(t, 200, r.Status, r.Raw)
	var a multiAnswer
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &a), r.Raw)
	require.Contains(t, r.Raw, `"_shards"`)
	return a
}

// assertHits compares hits, distances as float32 (the server's shortest
// float32 text).
func assertHits(t *testing.T, want, got []wantHit, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		w, g := want[i], got[i]
		assert.Equal(t, w.Index, g.Index, "%s: rank %d", what, i)
		assert.Equal(t, w.ID, g.ID, "%s: rank %d", what, i)
		assert.Equal(t, float32(w.Distance), float32(g.Distance), "%s: rank %d", what, i)
		assert.Equal(t, w.Score, g.Score, "%s: rank %d", what, i)
	}
}

// faissPer is FAISS's per-segment answers to query q: segments segs of
// shard, served as prefix+i; allow takes the filtered answers.
func faissPer(sh segShard, prefix string, segs []int, q int, allow bool) map[string]perIndex {
	per := map[string]perIndex{}
	for _, i := range segs {
		a := sh.Segments[segKey(i)].K10
		if allow {
			a = sh.Segments[segKey(i)].K10Allow
		}
		per[fmt.Sprintf("%s%d", prefix, i)] = perIndex{a.IDs[q], a.Distances[q]}
	}
	return per
}

func searchBodyK(q []float64, k int, extra string) string {
	return fmt.Sprintf(`{"vector":%s,"k":%d%s}`, vectorJSON(q), k, extra)
}

// TestMultiTargetMatchesFAISS: a search of a shard's segments, named as a
// list, a pattern or an alias, answers FAISS's per-segment answers merged
// by the documented rule, with per-segment filters too, on an l2 and an
// innerproduct shard.
func TestMultiTargetMatchesFAISS(t *testing.T) {
	shards := loadSegments(t)
	_, ts := newSegmentServer(t, Config{})
	l2, ip := shards["l2"], shards["ip"]
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	var names []string
	for _, i := range all {
		loadSegment(t, ts, fmt.Sprintf("l2-%d", i), "l2", i)
		names = append(names, fmt.Sprintf("l2-%d", i))
	}
	for i := range 3 {
		loadSegment(t, ts, fmt.Sprintf("ip-%d", i), "ip", i)
	}
	r := call(t, ts, "POST", "/_aliases", `{"actions":[{"add":{"indices":["l2-0","l2-1","l2-2","l2-3"],"alias":"shard"}},{"add":{"index":"l2-[4-7]","alias":"x"}}]}`)
	require.Equal(t, 404, r.Status, "a name with no '*' is a name: %s", r.Raw)
	r = call(t, ts, "POST", "/_aliases", `{"actions":[{"add":{"indices":["l2-0","l2-1","l2-2","l2-3"],"alias":"shard"}},{"add":{"index":"l2-*","alias":"shard"}}]}`)
	require.Equal(t, 200, r.Status, r.Raw)

	for _, k := range []int{1, 10, 25} {
		for q := range l2.Queries {
			want := mergeWant("l2", faissPer(l2, "l2-", all, q, false), k)
			for _, targets := range []string{strings.Join(names, ","), "l2-*", "shard", "_all", "l2-7,shard,l2-0,l2-*"} {
				if targets == "_all" {
					continue // the ip shard is served too: another space
				}
				a := searchMulti(t, ts, targets, searchBodyK(l2.Queries[q], k, ""))
				assertHits(t, want, a.Hits, fmt.Sprintf("%s k=%d q=%d", targets, k, q))
				assert.Equal(t, 8, a.Shards.Total, targets)
				assert.Equal(t, 8, a.Shards.Successful, targets)
				assert.Zero(t, a.Shards.Failed)
				assert.Nil(t, a.Truncated, "a k-NN answer has no truncated")
			}
		}
	}

	// Per-segment filters: FAISS's answers with each segment's allow-list.
	var fs []string
	for _, i := range all {
		b, _ := json.Marshal(l2.Segments[segKey(i)].Allow)
		fs = append(fs, fmt.Sprintf(`"l2-%d":{"ids":%s}`, i, b))
	}
	filters := `,"filters":{` + strings.Join(fs, ",") + `}`
	for q := range l2.Queries {
		want := mergeWant("l2", faissPer(l2, "l2-", all, q, true), 10)
		a := searchMulti(t, ts, "shard", searchBodyK(l2.Queries[q], 10, filters))
		assertHits(t, want, a.Hits, fmt.Sprintf("filters q=%d", q))
	}

	// filter applies to every index; filters overrides it for those it
	// names; an empty list skips an index.
	allow3, _ := json.Marshal(l2.Segments[segKey(3)].Allow)
	for q := range l2.Queries {
		per := faissPer(l2, "l2-", []int{3}, q, true)
		a := searchMulti(t, ts, "l2-3,l2-5", searchBodyK(l2.Queries[q], 10, `,"filter":{"ids":`+string(allow3)+`},"filters":{"l2-5":{"ids":[]}}`))
		assertHits(t, mergeWant("l2", per, 10), a.Hits, "filter and an empty filters entry")
		assert.Equal(t, 2, a.Shards.Total)
		assert.Equal(t, 2, a.Shards.Successful)
		assert.Equal(t, 1, a.Shards.Skipped)
	}

	// The innerproduct shard.
	for q := range ip.Queries {
		want := mergeWant("innerproduct", faissPer(ip, "ip-", []int{0, 1, 2}, q, false), 10)
		a := searchMulti(t, ts, "ip-*", searchBodyK(ip.Queries[q], 10, ""))
		assertHits(t, want, a.Hits, fmt.Sprintf("ip q=%d", q))
		var fs []string
		for i := range 3 {
			b, _ := json.Marshal(ip.Segments[segKey(i)].Allow)
			fs = append(fs, fmt.Sprintf(`"ip-%d":{"ids":%s}`, i, b))
		}
		want = mergeWant("innerproduct", faissPer(ip, "ip-", []int{0, 1, 2}, q, true), 10)
		a = searchMulti(t, ts, "ip-0,ip-1,ip-2", searchBodyK(ip.Queries[q], 10, `,"filters":{`+strings.Join(fs, ",")+`}`))
		assertHits(t, want, a.Hits, fmt.Sprintf("ip filters q=%d", q))
	}

	// A single index named as such answers as it always has: no _index, no
	// _shards; FAISS's own answer.
	for q := range l2.Queries {
		r := call(t, ts, "POST", "/indexes/l2-1/_search", searchBodyK(l2.Queries[q], 10, ""))
		require.Equal(t, 200, r.Status, r.Raw)
		assert.NotContains(t, r.Raw, "_index")
		assert.NotContains(t, r.Raw, "_shards")
		var a multiAnswer
		require.NoError(t, json.Unmarshal([]byte(r.Raw), &a))
		want := mergeWant("l2", faissPer(l2, "l2-", []int{1}, q, false), 10)
		for i := range want {
			want[i].Index = ""
		}
		assertHits(t, want, a.Hits, "single")
	}
}

// TestMultiTargetRefusals: mismatched shapes, filters naming no target and
// bad target lists are 400s; a pattern matching nothing answers no hits.
func TestMultiTargetRefusals(t *testing.T) {
	shards := loadSegments(t)
	_, ts := newSegmentServer(t, Config{})
	loadSegment(t, ts, "a", "l2", 0)
	loadSegment(t, ts, "b", "l2", 1)
	loadSegment(t, ts, "c", "ip", 0)
	r := call(t, ts, "PUT", "/indexes/d32", `{"path":"fixtures/hnsw_flat_l2.faiss"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	q := searchBodyK(shards["l2"].Queries[0], 5, "")

	r = call(t, ts, "POST", "/indexes/a,b,d32/_search", q)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, `index \"d32\" has d=32`)
	r = call(t, ts, "POST", "/indexes/a,b,c/_search", q)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, `index \"c\" has d=16, space_type innerproduct`)

	r = call(t, ts, "POST", "/indexes/a,b/_search", searchBodyK(shards["l2"].Queries[0], 5, `,"filters":{"a":{"ids":[1]},"zz":{"ids":[2]}}`))
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, `filters names \"zz\"`)
	r = call(t, ts, "POST", "/indexes/a/_search", searchBodyK(shards["l2"].Queries[0], 5, `,"filters":{"b":{"ids":[1]}}`))
	assert.Equal(t, 400, r.Status, "a single index's filters name it alone: %s", r.Raw)
	r = call(t, ts, "POST", "/indexes/a,b/_search", searchBodyK(shards["l2"].Queries[0], 5, `,"filters":{"a":null}`))
	assert.Equal(t, 400, r.Status, r.Raw)
	r = call(t, ts, "POST", "/indexes/a,b/_search", searchBodyK(shards["l2"].Queries[0], 5, `,"filters":{"a":{"ids":[1]},"a":{"ids":[2]}}`))
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "duplicate_field")

	for _, bad := range []string{"a,,b", "a,", ",a", "a,_b", "a,b:c", "a,*%20"} {
		r = call(t, ts, "POST", "/indexes/"+bad+"/_search", q)
		assert.Equal(t, 400, r.Status, "%s: %s", bad, r.Raw)
	}

	r = call(t, ts, "POST", "/indexes/zz*/_search", q)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.JSONEq(t, `{"total":0,"successful":0,"skipped":0,"failed":0}`, string(mustField(t, r.Raw, "_shards")))
	assert.JSONEq(t, `[]`, string(mustField(t, r.Raw, "hits")))
	r = call(t, ts, "POST", "/indexes/zz*,nope/_search", q)
	assert.Equal(t, 404, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "index_not_found")
}

// mustField is one top-level field of a JSON object.
func mustField(t *testing.T, raw, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(raw), &m), raw)
	v, ok := m[key]
	require.True(t, ok, "no %s in %s", key, raw)
	return v
}

// TestMultiTargetPartialFailure: an index that is missing or failed (its
// file changed: 503) is listed in _shards.failures beside the others'
// hits; with "allow_partial_results": false it is the answer, with the
// status a search of it alone gets; when every index fails, the first
// failure is the answer.
func TestMultiTargetPartialFailure(t *testing.T) {
	shards := loadSegments(t)
	l2 := shards["l2"]
	root := t.TempDir()
	src, err := os.ReadFile(filepath.Join("../testdata", segFile("l2", 2)))
	require.NoError(t, err)
	changing := filepath.Join(root, "changing.faiss")
	require.NoError(t, os.WriteFile(changing, src, 0o644))
	_, ts := newSegmentServer(t, Config{DataRoots: []string{root}})
	loadSegment(t, ts, "l2-0", "l2", 0)
	loadSegment(t, ts, "l2-1", "l2", 1)
	r := call(t, ts, "PUT", "/indexes/l2-2", `{"path":`+fmt.Sprintf("%q", changing)+`,"backend":"pread","semantics":"faiss-1.7.3","kernel":"exact"}`)
	require.Equal(t, 200, r.Status, r.Raw)

	q := l2.Queries[3]
	a := searchMulti(t, ts, "l2-0,nope,l2-1", searchBodyK(q, 10, ""))
	assertHits(t, mergeWant("l2", faissPer(l2, "l2-", []int{0, 1}, 3, false), 10), a.Hits, "missing")
	assert.Equal(t, 3, a.Shards.Total)
	assert.Equal(t, 2, a.Shards.Successful)
	assert.Equal(t, 1, a.Shards.Failed)
	require.Len(t, a.Shards.Failures, 1)
	assert.Equal(t, "nope", a.Shards.Failures[0].Index)
	assert.Equal(t, "index_not_found", a.Shards.Failures[0].Reason.Type)
	assert.Equal(t, 404, a.Shards.Failures[0].Status)
	r = call(t, ts, "POST", "/indexes/l2-0,nope,l2-1/_search", searchBodyK(q, 10, `,"allow_partial_results":false`))
	assert.Equal(t, 404, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "index_not_found")

	require.NoError(t, os.Truncate(changing, 0))
	a = searchMulti(t, ts, "l2-*", searchBodyK(q, 10, ""))
	assertHits(t, mergeWant("l2", faissPer(l2, "l2-", []int{0, 1}, 3, false), 10), a.Hits, "changed")
	require.Len(t, a.Shards.Failures, 1)
	assert.Equal(t, "l2-2", a.Shards.Failures[0].Index)
	assert.Equal(t, 503, a.Shards.Failures[0].Status)
	assert.Equal(t, "index_file_changed", a.Shards.Failures[0].Reason.Type)
	r = call(t, ts, "POST", "/indexes/l2-*/_search", searchBodyK(q, 10, `,"allow_partial_results":false`))
	assert.Equal(t, 503, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "index_file_changed")
	r = call(t, ts, "POST", "/indexes/l2-2,nope/_search", searchBodyK(q, 10, ""))
	assert.Equal(t, 503, r.Status, "every index failed: the first failure, in name order: %s", r.Raw)
	r = call(t, ts, "POST", "/indexes/l2-2,a-missing/_search", searchBodyK(q, 10, ""))
	assert.Equal(t, 404, r.Status, "every index failed: the first failure, in name order: %s", r.Raw)
	r = call(t, ts, "POST", "/indexes/l2-2,zz*/_search", searchBodyK(q, 10, ""))
	assert.Equal(t, 503, r.Status, r.Raw)

	// Past the request timeout, each index fails as a search of it alone
	// would (504), and so does the search.
	_, tsT := newSegmentServer(t, Config{RequestTimeout: time.Nanosecond})
	loadSegment(t, tsT, "l2-0", "l2", 0)
	loadSegment(t, tsT, "l2-1", "l2", 1)
	r = call(t, tsT, "POST", "/indexes/l2-0,l2-1/_search", searchBodyK(q, 10, ""))
	assert.Equal(t, 504, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "search_timeout")
}

// TestMultiTargetRadial: a radial search of many indexes answers the union
// of each index's own radial answer, merged by the documented rule and cut
// at max_radial_results, saying so.
func TestMultiTargetRadial(t *testing.T) {
	shards := loadSegments(t)
	l2 := shards["l2"]
	for _, cap := range []int{0, 12} {
		_, ts := newSegmentServer(t, Config{Limits: Limits{MaxRadialResults: cap}})
		for i := range 8 {
			loadSegment(t, ts, fmt.Sprintf("l2-%d", i), "l2", i)
		}
		for q := range l2.Queries {
			for _, radius := range []string{`"max_distance":40`, `"min_score":0.02`} {
				body := fmt.Sprintf(`{"vector":%s,%s}`, vectorJSON(l2.Queries[q]), radius)
				per := map[string]perIndex{}
				cut := false
				for i := range 8 {
					name := fmt.Sprintf("l2-%d", i)
					r := call(t, ts, "POST", "/indexes/"+name+"/_search", body)
					require.Equal(t, 200, r.Status, r.Raw)
					var one struct {
						Hits      []wantHit `json:"hits"`
						Truncated bool      `json:"truncated"`
					}
					require.NoError(t, json.Unmarshal([]byte(r.Raw), &one))
					var pi perIndex
					for _, h := range one.Hits {
						pi.ids = append(pi.ids, h.ID)
						pi.dist = append(pi.dist, h.Distance)
					}
					per[name] = pi
					cut = cut || one.Truncated
				}
				want := mergeWant("l2", per, -1)
				limit := cap
				if limit == 0 {
					limit = 10000
				}
				if len(want) > limit {
					want, cut = want[:limit], true
				}
				a := searchMulti(t, ts, "l2-*", body)
				assertHits(t, want, a.Hits, fmt.Sprintf("cap %d q %d %s", cap, q, radius))
				require.NotNil(t, a.Truncated, "a radial answer says whether it was cut")
				assert.Equal(t, cut, *a.Truncated, "cap %d q %d %s", cap, q, radius)
				if cap == 12 && q == 0 {
					assert.True(t, *a.Truncated, "the test's cap cuts the first query's hits")
				}
			}
		}
	}
}

// ndjson joins lines into an NDJSON body.
func ndjson(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// TestMsearchNDJSON: POST /_msearch answers its searches in order, each
// with its status: a search of many as _search answers it, a single index
// as its own _search does, a failing one its own error; its lines are held
// to _search's rules, and their number to max_msearch_vectors.
func TestMsearchNDJSON(t *testing.T) {
	shards := loadSegments(t)
	l2 := shards["l2"]
	_, ts := newSegmentServer(t, Config{Limits: Limits{MaxMsearchVectors: 4}})
	for i := range 3 {
		loadSegment(t, ts, fmt.Sprintf("l2-%d", i), "l2", i)
	}
	require.Equal(t, 200, call(t, ts, "POST", "/_aliases", `{"actions":[{"add":{"indices":["l2-1","l2-2"],"alias":"s"}}]}`).Status)
	body := ndjson(
		`{"index":"l2-*"}`, searchBodyK(l2.Queries[0], 10, ""),
		`{"index":"nope"}`, searchBodyK(l2.Queries[1], 10, ""),
		`{"index":["l2-0"]}`, searchBodyK(l2.Queries[2], 5, ""),
		`{"index":["s","l2-0"]}`, searchBodyK(l2.Queries[3], 10, `,"filters":{"l2-2":{"ids":[]}}`),
	)
	r := call(t, ts, "POST", "/_msearch", body, "Content-Type", "application/x-ndjson")
	require.Equal(t, 200, r.Status, r.Raw)
	var got struct {
		Took      float64           `json:"took"`
		Responses []json.RawMessage `json:"responses"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &got))
	require.Len(t, got.Responses, 4)
	var a multiAnswer
	require.NoError(t, json.Unmarshal(got.Responses[0], &a))
	assertHits(t, mergeWant("l2", faissPer(l2, "l2-", []int{0, 1, 2}, 0, false), 10), a.Hits, "first")
	assert.Equal(t, "200", string(mustField(t, string(got.Responses[0]), "status")))
	assert.JSONEq(t, `{"error":{"type":"index_not_found","reason":"no index named \"nope\""},"status":404}`, string(got.Responses[1]))
	single := string(got.Responses[2])
	assert.NotContains(t, single, "_shards")
	assert.NotContains(t, single, "_index")
	assert.Contains(t, single, `"status":200}`)
	one := call(t, ts, "POST", "/indexes/l2-0/_search", searchBodyK(l2.Queries[2], 5, ""))
	assert.Equal(t, string(mustField(t, one.Raw, "hits")), string(mustField(t, single, "hits")), "a single index answers as its own _search")
	require.NoError(t, json.Unmarshal(got.Responses[3], &a))
	assertHits(t, mergeWant("l2", faissPer(l2, "l2-", []int{0, 1}, 3, false), 10), a.Hits, "alias and a name")
	assert.Equal(t, 1, a.Shards.Skipped)

	// Any content type; the last newline may be left out.
	r = call(t, ts, "POST", "/_msearch", strings.TrimSuffix(ndjson(`{"index":"l2-0"}`, searchBodyK(l2.Queries[0], 1, "")), "\n"), "Content-Type", "text/plain")
	assert.Equal(t, 200, r.Status, r.Raw)

	// Each line as strictly as a _search body; the request fails naming it.
	for bad, why := range map[string]string{
		ndjson(`{"index":"l2-0"}`, searchBodyK(l2.Queries[0], 1, `,"kk":1`)):                  "line 2: unknown field",
		ndjson(`{"index":"l2-0"}`, `{"vector":[1],"k":1,"k":2}`):                              "duplicate_field",
		ndjson(`{"index":"l2-0"}`, `{"vector":[1],"filter":null}`):                            "line 2: filter must be an object, not null",
		ndjson(`{"index":"l2-0","x":1}`, searchBodyK(l2.Queries[0], 1, "")):                   "line 1: unknown field",
		ndjson(`{"index":null}`, searchBodyK(l2.Queries[0], 1, "")):                           "line 1: index is null",
		ndjson(`{}`, searchBodyK(l2.Queries[0], 1, "")):                                       "line 1: the header names no index",
		ndjson(`{"index":"a,,b"}`, searchBodyK(l2.Queries[0], 1, "")):                         "line 1: invalid",
		ndjson(`{"index":"l2-0"}`):                                                            "line 1 is a header without its body",
		ndjson(`{"index":"l2-0"}`, ``, `{"index":"l2-0"}`, searchBodyK(l2.Queries[0], 1, "")): "line 2 is empty",
		ndjson(`{"index":"l2-0"}`, searchBodyK(l2.Queries[0], 1, ""), `[1,2]`, `{}`):          "line 3",
		strings.Repeat(ndjson(`{"index":"l2-0"}`, searchBodyK(l2.Queries[0], 1, "")), 5):      "max_msearch_vectors",
		"": "empty",
	} {
		r := call(t, ts, "POST", "/_msearch", bad)
		assert.Equal(t, 400, r.Status, "%.80q: %s", bad, r.Raw)
		assert.Contains(t, r.Raw, why, "%.80q", bad)
	}
	r = call(t, ts, "POST", "/_msearch", strings.Repeat(ndjson(`{"index":"l2-0"}`, searchBodyK(l2.Queries[0], 1, "")), 4))
	assert.Equal(t, 200, r.Status, "max_msearch_vectors searches: %s", r.Raw)

	// Past the request timeout, each search answers its own 504.
	_, tsT := newSegmentServer(t, Config{RequestTimeout: time.Nanosecond})
	loadSegment(t, tsT, "l2-0", "l2", 0)
	r = call(t, tsT, "POST", "/_msearch", ndjson(`{"index":"l2-0"}`, searchBodyK(l2.Queries[0], 1, ""), `{"index":"l2-*"}`, searchBodyK(l2.Queries[0], 1, "")))
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, 2, strings.Count(r.Raw, `"status":504`), r.Raw)
}

// TestMultiTargetIndexBound: one request names at most maxIndexSearches
// indexes, counting each search's: a pattern over many indexes in every
// search of an _msearch is refused before anything is searched.
func TestMultiTargetIndexBound(t *testing.T) {
	shards := loadSegments(t)
	_, ts := newSegmentServer(t, Config{})
	n := maxIndexSearches/1000 + 1
	for i := range n {
		loadSegment(t, ts, fmt.Sprintf("s-%d", i), "l2", 2)
	}
	pair := ndjson(`{"index":"s-*"}`, searchBodyK(shards["l2"].Queries[0], 1, `,"filter":{"ids":[]}`))
	r := call(t, ts, "POST", "/_msearch", strings.Repeat(pair, 1000))
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, fmt.Sprintf("at most %d", maxIndexSearches))
	r = call(t, ts, "POST", "/_msearch", strings.Repeat(pair, maxIndexSearches/n))
	assert.Equal(t, 200, r.Status, r.Raw)
}
