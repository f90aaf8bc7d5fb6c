package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// s3Collector exports, when scraped, the process's S3 request metrics
// (partial/s3's counters, summed over every object the server reads) and,
// for each index read through a local disk cache, where its block reads
// were served (partial.TierStats).
type s3Collector struct {
	reg                                       *Registry
	requests, bytes, retries, errors, latency *prometheus.Desc
	tierReads, tierBytes, diskCorrupt         *prometheus.Desc
	diskWriteErrors, diskUsed, diskBudget     *prometheus.Desc
}

func newS3Collector(reg *Registry) *s3Collector {
	return &s3Collector{
		reg: reg,
		tierReads: prometheus.NewDesc("faiss_sidecar_s3_tier_reads_total",
			"Block reads of an index at s3:// with a disk cache, by the tier that served them: memory (block cache), disk (the cache directory), cold (fetched from the object store).",
			[]string{"index", "tier"}, nil),
		tierBytes: prometheus.NewDesc("faiss_sidecar_s3_tier_bytes_total",
			"Bytes of the block reads of faiss_sidecar_s3_tier_reads_total, by tier.", []string{"index", "tier"}, nil),
		diskCorrupt: prometheus.NewDesc("faiss_sidecar_s3_disk_cache_corrupt_blocks_total",
			"Disk cache blocks found damaged (checksum, header, length), dropped and fetched again, by index.", []string{"index"}, nil),
		diskWriteErrors: prometheus.NewDesc("faiss_sidecar_s3_disk_cache_write_errors_total",
			"Blocks that could not be written to the disk cache (served, not cached), by index.", []string{"index"}, nil),
		diskUsed: prometheus.NewDesc("faiss_sidecar_s3_disk_cache_used_bytes",
			"Bytes of blocks in the disk cache directory (every object in it).", nil, nil),
		diskBudget: prometheus.NewDesc("faiss_sidecar_s3_disk_cache_budget_bytes",
			"The disk cache directory's byte budget.", nil, nil),
		requests: prometheus.NewDesc("faiss_sidecar_s3_requests_total",
			"S3 request attempts sent, retries included, by method.", []string{"method"}, nil),
		bytes: prometheus.NewDesc("faiss_sidecar_s3_received_bytes_total",
			"Body bytes of the S3 GETs that succeeded.", nil, nil),
		retries: prometheus.NewDesc("faiss_sidecar_s3_retries_total",
			"S3 request attempts made again after a retryable failure (5xx, throttling, timeout, connection).", nil, nil),
		errors: prometheus.NewDesc("faiss_sidecar_s3_errors_total",
			"Failed S3 request attempts by kind: not_found, changed (412: the object was replaced), throttled, 5xx, 4xx, timeout, connection, other.",
			[]string{"kind"}, nil),
		latency: prometheus.NewDesc("faiss_sidecar_s3_get_seconds",
			"Latency of S3 GET attempts, from sending to the last body byte or the failure.", nil, nil),
	}
}

func (c *s3Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.bytes
	ch <- c.retries
	ch <- c.errors
	ch <- c.latency
	ch <- c.tierReads
	ch <- c.tierBytes
	ch <- c.diskCorrupt
	ch <- c.diskWriteErrors
	ch <- c.diskUsed
	ch <- c.diskBudget
}

func (c *s3Collector) Collect(ch chan<- prometheus.Metric) {
	m := engine.ReadS3Metrics()
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(m.GETs), "GET")
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(m.HEADs), "HEAD")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(m.ReceivedBytes))
	ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(m.Retries))
	for _, k := range engine.S3ErrorKinds {
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(m.Errors[k]), k)
	}
	h := m.GETLatency
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Cumulative[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.latency, h.Count, h.Sum, buckets)
	c.collectTiers(ch)
}

// collectTiers exports the tier counters of every index read through a
// disk cache; the directory's usage and budget once (one directory per
// server).
func (c *s3Collector) collectTiers(ch chan<- prometheus.Metric) {
	dir := false
	for name := range c.reg.all() {
		_, l, err := c.reg.acquire(name)
		if err != nil {
			continue
		}
		st, ok := l.h.x.StorageStats()
		l.release()
		ts := st.Tiers
		if !ok || ts == nil {
			continue
		}
		for _, t := range []struct {
			tier         string
			reads, bytes int64
		}{{"memory", ts.MemoryHits, ts.MemoryBytes}, {"disk", ts.DiskHits, ts.DiskBytes}, {"cold", ts.ColdReads, ts.ColdBytes}} {
			ch <- prometheus.MustNewConstMetric(c.tierReads, prometheus.CounterValue, float64(t.reads), name, t.tier)
			ch <- prometheus.MustNewConstMetric(c.tierBytes, prometheus.CounterValue, float64(t.bytes), name, t.tier)
		}
		ch <- prometheus.MustNewConstMetric(c.diskCorrupt, prometheus.CounterValue, float64(ts.DiskCorrupt), name)
		ch <- prometheus.MustNewConstMetric(c.diskWriteErrors, prometheus.CounterValue, float64(ts.DiskWriteErrors), name)
		if !dir {
			dir = true
			ch <- prometheus.MustNewConstMetric(c.diskUsed, prometheus.GaugeValue, float64(ts.DiskUsedBytes))
			ch <- prometheus.MustNewConstMetric(c.diskBudget, prometheus.GaugeValue, float64(ts.DiskBudgetBytes))
		}
	}
}
