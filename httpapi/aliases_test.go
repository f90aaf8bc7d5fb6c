package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAliases: POST /_aliases applies its actions all or none, with
// OpenSearch's field names and error types; GET /_aliases and GET
// /indexes/{name} show them; an alias and an index never share a name;
// DELETE and remove_index take an index out of its aliases.
func TestAliases(t *testing.T) {
	_, ts := newSegmentServer(t, Config{})
	for i := range 4 {
		loadSegment(t, ts, fmt.Sprintf("s-%d", i), "l2", i)
	}
	aliases := func() string { r := call(t, ts, "GET", "/_aliases", ""); require.Equal(t, 200, r.Status); return r.Raw }
	post := func(body string) resp { return call(t, ts, "POST", "/_aliases", body) }

	empty := `{"s-0":{"aliases":{}},"s-1":{"aliases":{}},"s-2":{"aliases":{}},"s-3":{"aliases":{}}}`
	assert.JSONEq(t, empty, aliases())

	// One bad action leaves everything as it was.
	for body, want := range map[string]string{
		`{"actions":[{"add":{"index":"s-0","alias":"a"}},{"add":{"index":"nope","alias":"a"}}]}`:   "index_not_found",
		`{"actions":[{"add":{"index":"s-0","alias":"a"}},{"add":{"index":"s-1","alias":"s-2"}}]}`:  "invalid_alias_name",
		`{"actions":[{"add":{"index":"s-0","alias":"a"}},{"add":{"index":"s-1","alias":"_b"}}]}`:   "invalid_alias_name",
		`{"actions":[{"add":{"index":"s-0","alias":"a"}},{"add":{"index":"s-1","alias":"b*"}}]}`:   "invalid_alias_name",
		`{"actions":[{"add":{"index":"s-0","alias":"a"}},{"remove":{"index":"s-1","alias":"a"}}]}`: "aliases_not_found",
		`{"actions":[{"add":{"index":"s-0","alias":"a"}},{"add":{"index":"s-1"}}]}`:                "bad_request",
		`{"actions":[{"add":{"index":"s-0","alias":"a"},"remove":{"index":"s-0","alias":"a"}}]}`:   "exactly one of",
		`{"actions":[{"add":{"index":"s-0","alias":"a"}},{"remove_index":{"index":"nope"}}]}`:      "index_not_found",
		`{"actions":[{"remove_index":{"index":"s-0","alias":"a"}}]}`:                               "bad_request",
		`{"actions":[]}`: "bad_request",
		`{"actions":[{"add":{"index":"s-0","alias":"a","is_write_index":true}}]}`: "unknown field",
		`{"actions":null}`: "bad_request",
	} {
		r := post(body)
		assert.Contains(t, []int{400, 404}, r.Status, "%s: %s", body, r.Raw)
		assert.Contains(t, r.Raw, want, body)
		assert.JSONEq(t, empty, aliases(), "%s changed the aliases", body)
	}

	r := post(`{"actions":[{"add":{"indices":["s-0","s-1"],"alias":"a"}},{"add":{"index":"s-*","aliases":["all","b"]}},{"remove":{"index":"s-3","alias":"b"}}]}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.JSONEq(t, `{"acknowledged":true}`, r.Raw)
	assert.JSONEq(t, `{"s-0":{"aliases":{"a":{},"all":{},"b":{}}},"s-1":{"aliases":{"a":{},"all":{},"b":{}}},
		"s-2":{"aliases":{"all":{},"b":{}}},"s-3":{"aliases":{"all":{}}}}`, aliases())
	r = call(t, ts, "GET", "/indexes/s-0", "")
	assert.Equal(t, `["a","all","b"]`, string(mustField(t, r.Raw, "aliases")))
	r = call(t, ts, "GET", "/indexes/s-3", "")
	assert.Equal(t, `["all"]`, string(mustField(t, r.Raw, "aliases")))

	// An index may not be loaded under an alias's name.
	r = call(t, ts, "PUT", "/indexes/all", `{"path":"`+segFile("l2", 5)+`"}`)
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "invalid_index_name")

	// A wildcard remove takes every matching alias off its indexes; an
	// alias left with none is gone.
	r = post(`{"actions":[{"remove":{"index":"s-*","alias":"b*"}}]}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.NotContains(t, aliases(), `"b"`)

	// DELETE takes an index out of its aliases in the same step.
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/s-0", "").Status)
	assert.JSONEq(t, `{"s-1":{"aliases":{"a":{},"all":{}}},"s-2":{"aliases":{"all":{}}},"s-3":{"aliases":{"all":{}}}}`, aliases())
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/s-1", "").Status)
	assert.JSONEq(t, `{"s-2":{"aliases":{"all":{}}},"s-3":{"aliases":{"all":{}}}}`, aliases())
	r = call(t, ts, "POST", "/indexes/a/_search", `{"vector":[`+strings.Repeat("0,", 15)+`0]}`)
	assert.Equal(t, 404, r.Status, "alias a is gone with its last index: %s", r.Raw)
	// ...and its name may be an index's again.
	loadSegment(t, ts, "a", "l2", 0)

	// remove_index deletes an index with the alias changes, in one step.
	r = post(`{"actions":[{"add":{"index":"a","alias":"all"}},{"remove_index":{"index":"s-2"}}]}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.JSONEq(t, `{"a":{"aliases":{"all":{}}},"s-3":{"aliases":{"all":{}}}}`, aliases())
	assert.Equal(t, 404, call(t, ts, "GET", "/indexes/s-2", "").Status)
}

// TestAliasSwapUnderLoad is §2's merge under load: a shard of 8 segments
// behind an alias is searched without pause from several goroutines while
// a "merge" loads the segment holding the vectors of three of them, swaps
// the alias (add it, remove the three) in one request and deletes the
// three. Every answer equals the answer of the old set or of the new set,
// and none fails.
func TestAliasSwapUnderLoad(t *testing.T) {
	aliasSwapUnderLoad(t, func(ts *httptest.Server) {
		r := call(t, ts, "POST", "/_aliases", `{"actions":[{"add":{"index":"seg-8","alias":"shard"}},{"remove":{"indices":["seg-0","seg-1","seg-2"],"alias":"shard"}}]}`)
		require.Equal(t, 200, r.Status, r.Raw)
		for i := range 3 {
			require.Equal(t, 200, call(t, ts, "DELETE", fmt.Sprintf("/indexes/seg-%d", i), "").Status)
		}
	})
}

// TestRemoveIndexSwapUnderLoad is TestAliasSwapUnderLoad with the three
// segments deleted in the swap's own request (remove_index): the alias
// and the indexes change in one step (TestServedMoment checks what a
// search that resolved the old alias then sees).
func TestRemoveIndexSwapUnderLoad(t *testing.T) {
	aliasSwapUnderLoad(t, func(ts *httptest.Server) {
		r := call(t, ts, "POST", "/_aliases", `{"actions":[{"add":{"index":"seg-8","alias":"shard"}},{"remove_index":{"indices":["seg-0","seg-1","seg-2"]}}]}`)
		require.Equal(t, 200, r.Status, r.Raw)
	})
}

// aliasSwapUnderLoad searches the alias of 8 segments without pause while
// seg-8 is loaded and swap replaces segments 0 to 2 with it.
func aliasSwapUnderLoad(t *testing.T, swap func(ts *httptest.Server)) {
	shards := loadSegments(t)
	l2 := shards["l2"]
	require.Equal(t, []int{0, 1, 2}, l2.MergedFrom)
	_, ts := newSegmentServer(t, Config{})
	var acts []string
	for i := range 8 {
		loadSegment(t, ts, fmt.Sprintf("seg-%d", i), "l2", i)
		acts = append(acts, fmt.Sprintf(`{"add":{"index":"seg-%d","alias":"shard"}}`, i))
	}
	require.Equal(t, 200, call(t, ts, "POST", "/_aliases", `{"actions":[`+strings.Join(acts, ",")+`]}`).Status)

	oldSet, newSet := []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{3, 4, 5, 6, 7, 8}
	bodies := make([]string, len(l2.Queries))
	oldWant, newWant := make([][]wantHit, len(l2.Queries)), make([][]wantHit, len(l2.Queries))
	for q := range l2.Queries {
		bodies[q] = searchBodyK(l2.Queries[q], 10, "")
		oldWant[q] = mergeWant("l2", faissPer(l2, "seg-", oldSet, q, false), 10)
		newWant[q] = mergeWant("l2", faissPer(l2, "seg-", newSet, q, false), 10)
		require.NotEqual(t, oldWant[q], newWant[q], "query %d tells the sets apart", q)
		a := searchMulti(t, ts, "shard", bodies[q])
		assertHits(t, oldWant[q], a.Hits, "before")
	}
	same := func(want, got []wantHit) bool {
		if len(want) != len(got) {
			return false
		}
		for i := range want {
			w, g := want[i], got[i]
			if w.Index != g.Index || w.ID != g.ID || float32(w.Distance) != float32(g.Distance) || w.Score != g.Score {
				return false
			}
		}
		return true
	}

	var (
		stop              atomic.Bool
		sawOld, sawNew, n atomic.Int64
		firstBad          atomic.Value
		wg                sync.WaitGroup
		client            = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	)
	for g := range 4 {
		wg.Go(func() {
			for i := g; !stop.Load(); i++ {
				q := i % len(bodies)
				res, err := client.Post(ts.URL+"/indexes/shard/_search", "application/json", strings.NewReader(bodies[q]))
				if err != nil {
					firstBad.CompareAndSwap(nil, err.Error())
					return
				}
				var a multiAnswer
				err = json.NewDecoder(res.Body).Decode(&a)
				res.Body.Close()
				n.Add(1)
				switch {
				case err != nil || res.StatusCode != 200:
					firstBad.CompareAndSwap(nil, fmt.Sprintf("status %d, %v", res.StatusCode, err))
				case a.Shards.Failed != 0:
					firstBad.CompareAndSwap(nil, fmt.Sprintf("failures %+v", a.Shards.Failures))
				case same(oldWant[q], a.Hits):
					sawOld.Add(1)
				case same(newWant[q], a.Hits):
					sawNew.Add(1)
				default:
					firstBad.CompareAndSwap(nil, fmt.Sprintf("query %d: %+v is neither set's answer", q, a.Hits))
				}
			}
		})
	}
	pause := func() { // let some searches run between the steps
		for start := n.Load(); n.Load() < start+20; {
			time.Sleep(time.Millisecond)
		}
	}
	pause()
	loadSegment(t, ts, "seg-8", "l2", 8)
	pause()
	swap(ts)
	pause()
	stop.Store(true)
	wg.Wait()
	if bad := firstBad.Load(); bad != nil {
		t.Fatal(bad)
	}
	t.Logf("%d searches: %d answered the old set, %d the new", n.Load(), sawOld.Load(), sawNew.Load())
	assert.Positive(t, sawOld.Load())
	assert.Positive(t, sawNew.Load())
	for q := range bodies {
		assertHits(t, newWant[q], searchMulti(t, ts, "shard", bodies[q]).Hits, "after")
	}
}

// TestLeaseOutlivesAliasSwap: the leases a search takes at its start keep
// the handles of the indexes it resolved, through an alias swap and the
// deletion of an index it holds; a search starting after the swap
// resolves the new set.
func TestLeaseOutlivesAliasSwap(t *testing.T) {
	shards := loadSegments(t)
	s, ts := newSegmentServer(t, Config{})
	loadSegment(t, ts, "a", "l2", 0)
	loadSegment(t, ts, "b", "l2", 1)
	require.Equal(t, 200, call(t, ts, "POST", "/_aliases", `{"actions":[{"add":{"indices":["a","b"],"alias":"shard"}}]}`).Status)
	shard := [][]targetExpr{{{name: "shard"}}}

	per, leased, _, err := s.Reg.leaseTargets(shard)
	require.NoError(t, err)
	require.Len(t, per[0], 2)
	r := call(t, ts, "POST", "/_aliases", `{"actions":[{"remove":{"index":"a","alias":"shard"}}]}`)
	require.Equal(t, 200, r.Status, r.Raw)
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/a", "").Status)

	h := leased["a"].l.h
	qp, err := s.plan(h, IntParam{V: 10, Set: true}, radial{}, nil, nil, nil)
	require.NoError(t, err)
	hits, _, err := h.x.Query(&qp, shards["l2"].Queries[0], nil)
	require.NoError(t, err, "the deleted index's handle serves the search that holds it")
	assert.Len(t, hits, 10)
	assert.Equal(t, int64(1), h.users.count())

	after, leased2, _, err := s.Reg.leaseTargets(shard)
	require.NoError(t, err)
	require.Len(t, after[0], 1)
	assert.Equal(t, "b", after[0][0].name)
	releaseTargets(leased2)
	releaseTargets(leased)
	assert.Zero(t, h.users.count(), "released: the retired handle closes")
}

// TestServedMoment: a snapshot stays current through a load (a name
// added changes no answer before it serves) and stops being current when
// an index or an alias is taken away, by DELETE or POST /_aliases.
func TestServedMoment(t *testing.T) {
	s, ts := newSegmentServer(t, Config{})
	loadSegment(t, ts, "a", "l2", 0)
	loadSegment(t, ts, "b", "l2", 1)
	sv := s.Reg.snapshot()
	loadSegment(t, ts, "c", "l2", 2)
	assert.True(t, sv.current(), "a load")
	e, ok := sv.entry("c")
	assert.True(t, ok && e.cur.Load() != nil, "looked up as the registry serves it")
	require.Equal(t, 200, call(t, ts, "POST", "/_aliases", `{"actions":[{"add":{"indices":["a","b","c"],"alias":"shard"}}]}`).Status)
	assert.False(t, sv.current(), "an alias change")
	assert.NotContains(t, sv.aliases, "shard", "the snapshot's aliases are its moment's")

	sv = s.Reg.snapshot()
	require.Equal(t, []string{"a", "b", "c"}, sv.aliases["shard"])
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/a", "").Status)
	assert.False(t, sv.current(), "a delete")
	assert.Equal(t, []string{"a", "b", "c"}, sv.aliases["shard"], "never changed in place")
	assert.Equal(t, []string{"b", "c"}, s.Reg.snapshot().aliases["shard"])

	sv = s.Reg.snapshot()
	require.Equal(t, 200, call(t, ts, "POST", "/_aliases", `{"actions":[{"remove_index":{"index":"b"}}]}`).Status)
	assert.False(t, sv.current(), "remove_index")
	per, leased, _, err := s.Reg.leaseTargets([][]targetExpr{{{name: "shard"}}, {{name: "*", pattern: true}}})
	require.NoError(t, err)
	defer releaseTargets(leased)
	require.Len(t, per[0], 1)
	assert.Equal(t, "c", per[0][0].name)
	require.Len(t, per[1], 1)
	assert.Equal(t, "c", per[1][0].name)
}
