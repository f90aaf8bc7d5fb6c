package httpapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
)

// allowBuckets sets the S3 buckets whose objects (s3://BUCKET/KEY) the
// registry serves: for object paths, the allow-list replaces the data
// roots' confinement.
func (r *Registry) allowBuckets(buckets []string) error {
	for _, b := range buckets {
		if err := s3.CheckBucket(b); err != nil {
			return fmt.Errorf("s3 bucket allow-list: %w", err)
		}
	}
	r.buckets = slices.Clone(buckets)
	return nil
}

// resolveObject checks an s3://BUCKET/KEY path: well formed (a 400 saying
// why), and in an allowed bucket (a 403 naming the bucket, as a path
// outside the data roots is). It asks nothing of the object store: whether
// the object exists is the open's answer (404 file_not_found).
func (r *Registry) resolveObject(p string) (string, error) {
	bucket, _, err := s3.ParseURL(p)
	if err != nil {
		return "", badRequest("path %s", strings.TrimPrefix(err.Error(), partial.ErrBadOption.Error()+": "))
	}
	if len(r.buckets) == 0 {
		return "", &apiError{403, "forbidden_path", fmt.Sprintf(
			"%s: no S3 bucket is allowed on this server; allow one with serve --s3-bucket %s (or \"s3_buckets\" in the config file)", p, bucket)}
	}
	if !slices.Contains(r.buckets, bucket) {
		return "", &apiError{403, "forbidden_path", fmt.Sprintf(
			"%s: bucket %q is not in the allowed S3 buckets (--s3-bucket, \"s3_buckets\")", p, bucket)}
	}
	return p, nil
}

// s3Collector exports the process's S3 request metrics (partial/s3's
// counters, summed over every object the server reads) when scraped.
type s3Collector struct {
	requests, bytes, retries, errors, latency *prometheus.Desc
}

func newS3Collector() *s3Collector {
	return &s3Collector{
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
}

func (c *s3Collector) Collect(ch chan<- prometheus.Metric) {
	m := s3.ReadMetrics()
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(m.GETs), "GET")
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(m.HEADs), "HEAD")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(m.ReceivedBytes))
	ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(m.Retries))
	for _, k := range s3.ErrorKinds {
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(m.Errors[k]), k)
	}
	h := m.GETLatency
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Cumulative[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.latency, h.Count, h.Sum, buckets)
}
