package s3_test

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// delta is what the process's counters moved by since before.
func delta(before, after s3.Metrics) s3.Metrics {
	d := s3.Metrics{GETs: after.GETs - before.GETs, HEADs: after.HEADs - before.HEADs,
		ReceivedBytes: after.ReceivedBytes - before.ReceivedBytes, Retries: after.Retries - before.Retries,
		Errors: map[string]int64{}}
	for k, v := range after.Errors {
		d.Errors[k] = v - before.Errors[k]
	}
	d.GETLatency.Count = after.GETLatency.Count - before.GETLatency.Count
	d.GETLatency.Sum = after.GETLatency.Sum - before.GETLatency.Sum
	return d
}

// TestMetrics: each fault the proxy injects is counted under its kind,
// with the attempts, retries, bytes and GET latencies it caused.
func TestMetrics(t *testing.T) {
	bucket := s3test.Bucket(t)
	path, _ := partialtest.PatternFile(t, 1<<20)
	u := s3test.PutFile(t, bucket, "m.bin", path)
	fp := s3test.NewFaultProxy(t)
	opts := s3.Options{Endpoint: fp.URL, HeadBytes: 4096, Timeout: 300 * time.Millisecond, MaxAttempts: 3, Backoff: time.Millisecond}
	before := s3.ReadMetrics()
	o, err := client.Open(context.Background(), u, opts)
	require.NoError(t, err)
	defer o.Close()
	d := delta(before, s3.ReadMetrics())
	assert.Equal(t, int64(1), d.GETs, "open: one GET")
	assert.Equal(t, int64(4096), d.ReceivedBytes)
	assert.Equal(t, uint64(1), d.GETLatency.Count)
	assert.Positive(t, d.GETLatency.Sum)

	p := make([]byte, 1000)
	for _, c := range []struct {
		kind  string
		fault func(w http.ResponseWriter, r *http.Request)
	}{
		{s3.KindThrottled, func(w http.ResponseWriter, _ *http.Request) { s3test.SlowDown(w) }},
		{s3.KindThrottled, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTooManyRequests) }},
		{s3.KindServer, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }},
		{s3.KindConnection, func(w http.ResponseWriter, _ *http.Request) { s3test.Truncated(w) }},
		{s3.KindTimeout, func(_ http.ResponseWriter, r *http.Request) { s3test.Stall(r, 2*time.Second) }},
	} {
		start := fp.GETs.Load()
		fp.Set(func(n int64, w http.ResponseWriter, r *http.Request) bool {
			if n == start+1 {
				c.fault(w, r)
				return true
			}
			return false
		})
		before := s3.ReadMetrics()
		_, err := o.ReadAtContext(context.Background(), p, 100000, nil)
		require.NoError(t, err, c.kind)
		d := delta(before, s3.ReadMetrics())
		assert.Equal(t, int64(2), d.GETs, c.kind)
		assert.Equal(t, int64(1), d.Retries, c.kind)
		assert.Equal(t, int64(1000), d.ReceivedBytes, c.kind)
		assert.Equal(t, uint64(2), d.GETLatency.Count, c.kind)
		for _, k := range s3.ErrorKinds {
			want := int64(0)
			if k == c.kind {
				want = 1
			}
			assert.Equal(t, want, d.Errors[k], "%s: errors of kind %s", c.kind, k)
		}
		if c.kind == s3.KindTimeout {
			assert.GreaterOrEqual(t, d.GETLatency.Sum, 0.3, "the stalled attempt took the timeout")
		}
	}

	// Refused for good: counted once, not retried.
	fp.Set(func(n int64, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusForbidden)
		return true
	})
	before = s3.ReadMetrics()
	_, err = o.ReadAtContext(context.Background(), p, 200000, nil)
	require.ErrorIs(t, err, s3.ErrRequestFailed)
	d = delta(before, s3.ReadMetrics())
	assert.Equal(t, map[string]int64{s3.KindClient: 1}, nonZero(d.Errors))
	assert.Zero(t, d.Retries)
	fp.Clear()

	// A HEAD is counted as such.
	before = s3.ReadMetrics()
	require.NoError(t, o.CheckFile(context.Background()))
	d = delta(before, s3.ReadMetrics())
	assert.Equal(t, int64(1), d.HEADs)
	assert.Zero(t, d.GETs)

	// The object replaced: 412 counts as changed.
	s3test.Put(t, bucket, "m.bin", []byte("other bytes"))
	before = s3.ReadMetrics()
	_, err = o.ReadAtContext(context.Background(), p, 300000, nil)
	require.ErrorIs(t, err, partial.ErrFileChanged)
	assert.Equal(t, map[string]int64{s3.KindChanged: 1}, nonZero(delta(before, s3.ReadMetrics()).Errors))

	// A missing object: not_found.
	before = s3.ReadMetrics()
	_, err = client.Open(context.Background(), "s3://"+bucket+"/missing", opts)
	require.Error(t, err)
	assert.Equal(t, map[string]int64{s3.KindNotFound: 1}, nonZero(delta(before, s3.ReadMetrics()).Errors))

	// The histogram is cumulative and ends at Count for answers under 30 s.
	m := s3.ReadMetrics()
	h := m.GETLatency
	require.Len(t, h.Cumulative, len(h.Bounds))
	for i := 1; i < len(h.Cumulative); i++ {
		assert.LessOrEqual(t, h.Cumulative[i-1], h.Cumulative[i])
	}
	assert.Equal(t, h.Count, h.Cumulative[len(h.Cumulative)-1])
	if key := os.Getenv("AWS_ACCESS_KEY_ID"); key != "" {
		assert.NotContains(t, err.Error(), key)
	}
}

func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
