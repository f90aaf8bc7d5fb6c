package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type metrics struct {
	reg      *prometheus.Registry
	switches *prometheus.CounterVec
	// The per-request metrics are striped counters and histograms
	// (stripes.go), found by label in cowMaps (no lock) and summed into
	// constant metrics when scraped (Collect): the client library's own
	// keep one shared counter per series, written by every core on every
	// request.
	requestsDesc, latencyDesc, cacheDesc *prometheus.Desc
	failedDesc, residentDesc             *prometheus.Desc
	registry                             *Registry
	byRoute                              cowMap[*cowMap[*counter]]
	byIndex                              cowMap[*indexMetrics]
}

// indexMetrics are one index's per-request metrics.
type indexMetrics struct {
	latency      *histogram
	hits, misses counter
}

// searchBuckets are the search latency histogram's upper bounds: 50 µs to
// 1.6 s, doubling.
var searchBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)

func newMetrics(reg *Registry) *metrics {
	m := &metrics{
		registry: reg,
		failedDesc: prometheus.NewDesc("faiss_sidecar_index_failed",
			"1 when an index's file changed under it and its searches answer 503 until it is reloaded.", []string{"index"}, nil),
		reg: prometheus.NewRegistry(),
		requestsDesc: prometheus.NewDesc("faiss_sidecar_requests_total",
			"HTTP requests by route and status.", []string{"route", "status"}, nil),
		latencyDesc: prometheus.NewDesc("faiss_sidecar_search_seconds",
			"Search latency by index.", []string{"index"}, nil),
		residentDesc: prometheus.NewDesc("faiss_sidecar_resident_bytes",
			"Bytes each index counts against the memory budget.", []string{"index"}, nil),
		cacheDesc: prometheus.NewDesc("faiss_sidecar_cache_lookups_total",
			"Block-cache lookups by searches, by index and result.", []string{"index", "result"}, nil),
		switches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "faiss_sidecar_mode_switches_total",
			Help: "Mode switches by index and outcome."}, []string{"index", "outcome"}),
	}
	m.reg.MustRegister(m, m.switches, newS3Collector(reg),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) index(name string) *indexMetrics {
	return m.byIndex.get(name, func() *indexMetrics { return &indexMetrics{latency: newHistogram(searchBuckets)} })
}

func (m *metrics) request(route, code string) *counter {
	codes := m.byRoute.get(route, func() *cowMap[*counter] { return new(cowMap[*counter]) })
	return codes.get(code, func() *counter { return new(counter) })
}

// Describe is part of prometheus.Collector (the striped metrics).
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.requestsDesc
	ch <- m.latencyDesc
	ch <- m.cacheDesc
	ch <- m.failedDesc
	ch <- m.residentDesc
}

// Collect sums the striped metrics' stripes.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for route, codes := range m.byRoute.all() {
		for code, c := range codes.all() {
			ch <- prometheus.MustNewConstMetric(m.requestsDesc, prometheus.CounterValue, float64(c.value()), route, code)
		}
	}
	for name, im := range m.byIndex.all() {
		n, sum, cum := im.latency.snapshot()
		ch <- prometheus.MustNewConstHistogram(m.latencyDesc, n, sum, cum, name)
		ch <- prometheus.MustNewConstMetric(m.cacheDesc, prometheus.CounterValue, float64(im.hits.value()), name, "hit")
		ch <- prometheus.MustNewConstMetric(m.cacheDesc, prometheus.CounterValue, float64(im.misses.value()), name, "miss")
	}
	for name, e := range m.registry.all() {
		failed := 0.0
		if h := e.cur.Load(); h != nil && h.failed.Load() != nil {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(m.failedDesc, prometheus.GaugeValue, failed, name)
		// Read when scraped from what the budget counts (handle.resident),
		// so no load, switch, shrink or growth path has to remember it.
		if h := e.cur.Load(); h != nil {
			ch <- prometheus.MustNewConstMetric(m.residentDesc, prometheus.GaugeValue, float64(h.resident.Load()), name)
		}
	}
}

// forget drops an index's per-index series (DELETE).
func (m *metrics) forget(name string) {
	m.byIndex.remove(name)
	m.switches.DeletePartialMatch(prometheus.Labels{"index": name})
}
