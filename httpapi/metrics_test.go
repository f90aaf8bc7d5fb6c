package httpapi

import (
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricsNeedingS3 are the documented series an index at s3:// with a disk
// cache exports, and only it: this test has no object store (TestS3TierMetrics
// reads them with one).
var metricsNeedingS3 = map[string]bool{
	"faiss_sidecar_s3_tier_reads_total":                true,
	"faiss_sidecar_s3_tier_bytes_total":                true,
	"faiss_sidecar_s3_disk_cache_corrupt_blocks_total": true,
	"faiss_sidecar_s3_disk_cache_write_errors_total":   true,
	"faiss_sidecar_s3_disk_cache_used_bytes":           true,
	"faiss_sidecar_s3_disk_cache_budget_bytes":         true,
}

// TestDocumentedMetrics: every metric docs/rest-api.md names has a series
// on /metrics after a load, searches, an _msearch, a switch and a warmup,
// with a value that fits what happened. The names are read from the doc, so
// a metric documented without a series fails here.
func TestDocumentedMetrics(t *testing.T) {
	doc, err := os.ReadFile("../docs/rest-api.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, n := range regexp.MustCompile(`faiss_sidecar_[a-z0-9_]+`).FindAllString(string(doc), -1) {
		if !strings.HasSuffix(n, "_") { // faiss_sidecar_s3_*: a family, its members named in a table
			documented[n] = true
		}
	}
	require.Contains(t, documented, "faiss_sidecar_resident_bytes")

	_, ts := newTestServer(t, Config{})
	r := call(t, ts, "PUT", "/indexes/m", `{"path":"hnsw_flat_l2.faiss","mode":"memory_efficient","backend":"pread"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	q := vectorJSON(make([]float64, 32))
	for range 3 {
		r = call(t, ts, "POST", "/indexes/m/_search", `{"vector":`+q+`,"k":5}`)
		require.Equal(t, 200, r.Status, r.Raw)
	}
	r = call(t, ts, "POST", "/indexes/m/_msearch", `{"vectors":[`+q+`,`+q+`],"k":5}`)
	require.Equal(t, 200, r.Status, r.Raw)
	r = call(t, ts, "PUT", "/indexes/m/_mode", `{"mode":"full"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	r = call(t, ts, "POST", "/indexes/m/_warmup", ``)
	require.Equal(t, 200, r.Status, r.Raw)
	r = call(t, ts, "POST", "/indexes/m/_search", `{"vector":`+q+`,"k":5}`)
	require.Equal(t, 200, r.Status, r.Raw)
	resident := call(t, ts, "GET", "/indexes/m", ``).Body["resident_bytes"]

	r = call(t, ts, "GET", "/metrics", ``)
	require.Equal(t, 200, r.Status)
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(r.Raw))
	require.NoError(t, err)

	// sum adds the values of name's series whose labels include want.
	sum := func(name string, want map[string]string) (total float64, series int) {
		f := families[name]
		if f == nil {
			return 0, 0
		}
	next:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				if !hasLabel(m, k, v) {
					continue next
				}
			}
			series++
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
		return total, series
	}
	m := map[string]string{"index": "m"}
	checks := map[string]func(name string){
		"faiss_sidecar_requests_total": func(n string) {
			v, _ := sum(n, map[string]string{"route": "/indexes/:name/_search", "status": "200"})
			assert.Equal(t, 4.0, v, n)
		},
		"faiss_sidecar_search_seconds": func(n string) {
			v, _ := sum(n, m)
			assert.GreaterOrEqual(t, v, 4.0, "%s: searches timed", n)
		},
		"faiss_sidecar_cache_lookups_total": func(n string) {
			v, series := sum(n, m)
			assert.Equal(t, 2, series, "%s: hit and miss", n)
			assert.Positive(t, v, "%s: memory_efficient searches look blocks up", n)
		},
		"faiss_sidecar_resident_bytes": func(n string) {
			v, series := sum(n, m)
			require.Equal(t, 1, series, n)
			assert.Positive(t, v, n)
			assert.Equal(t, resident, v, "%s: what GET /indexes/m says", n)
		},
		"faiss_sidecar_mode_switches_total": func(n string) {
			v, _ := sum(n, m)
			assert.Equal(t, 1.0, v, n)
		},
		"faiss_sidecar_index_failed": func(n string) {
			v, series := sum(n, m)
			assert.Equal(t, 1, series, n)
			assert.Zero(t, v, n)
		},
		"faiss_sidecar_s3_requests_total": func(n string) {
			_, series := sum(n, nil)
			assert.Equal(t, 2, series, "%s: GET and HEAD", n)
		},
		"faiss_sidecar_s3_errors_total": func(n string) {
			_, series := sum(n, nil)
			assert.Greater(t, series, 1, "%s: one per kind", n)
		},
	}
	for name := range documented {
		if metricsNeedingS3[name] {
			continue
		}
		f := families[name]
		if !assert.NotNil(t, f, "documented metric %s has no series on /metrics", name) {
			continue
		}
		assert.NotEmpty(t, f.GetMetric(), name)
		if c := checks[name]; c != nil {
			c(name)
			continue
		}
		// The rest (process-wide S3 counters) exist with a value of 0 or more.
		v, series := sum(name, nil)
		assert.Positive(t, series, name)
		assert.GreaterOrEqual(t, v, 0.0, name)
	}
	for name := range checks {
		assert.True(t, documented[name], "%s is checked but no longer documented", name)
	}
	for name := range metricsNeedingS3 {
		assert.True(t, documented[name], "%s is excused but no longer documented", name)
	}

	// A deleted index's series go.
	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/m", ``).Status)
	r = call(t, ts, "GET", "/metrics", ``)
	assert.NotContains(t, r.Raw, `faiss_sidecar_resident_bytes{index="m"}`)
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

// TestBodiesEndInNewline: every JSON body ends with "\n", as OpenSearch's
// do, so a shell prompt after `curl` starts on its own line: success and
// error envelopes, the hand-written _search and _msearch bodies, the
// index listing, /_health and /.
func TestBodiesEndInNewline(t *testing.T) {
	_, ts := newTestServer(t, Config{})
	q := vectorJSON(make([]float64, 32))
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/indexes/m", `{"path":"hnsw_flat_l2.faiss"}`},
		{"POST", "/indexes/m/_search", `{"vector":` + q + `,"k":3}`},
		{"POST", "/indexes/m/_search", `{"vector":` + q + `,"k":3,"profile":true}`},
		{"POST", "/indexes/m/_msearch", `{"vectors":[` + q + `,[1]],"k":3}`},
		{"POST", "/indexes/m/_search", `{"vector":[1]}`},
		{"GET", "/indexes", ``},
		{"GET", "/indexes/m", ``},
		{"GET", "/indexes/none", ``},
		{"GET", "/_health", ``},
		{"GET", "/", ``},
		{"GET", "/no/such/route", ``},
		{"POST", "/indexes/m/_warmup", ``},
		{"DELETE", "/indexes/m", ``},
	} {
		r := call(t, ts, c.method, c.path, c.body)
		assert.True(t, strings.HasSuffix(r.Raw, "}\n") && !strings.HasSuffix(r.Raw, "\n\n"),
			"%s %s (%d): %q", c.method, c.path, r.Status, r.Raw)
		assert.NotNil(t, r.Body, "%s %s: one JSON value", c.method, c.path)
		assert.Equal(t, "application/json; charset=utf-8", r.ContentType, c.path)
	}
}
