package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// s3Env is a process environment whose S3 client opens every object with
// d (an endpoint through a fault proxy, short timeouts): a server's
// Config.Env.
func s3Env(d s3.Options) *engine.Env { return &engine.Env{S3: s3.NewClient(d)} }

// TestS3PathRules: an s3:// path is confined to the allowed buckets (403
// forbidden_path naming the bucket, or saying how to allow one), a
// malformed one is a 400 saying why, and neither asks the object store
// anything; the allow-list is checked when the server starts.
func TestS3PathRules(t *testing.T) {
	_, none := newTestServer(t, Config{})
	r := call(t, none, "PUT", "/indexes/x", `{"path":"s3://bkt/a.faiss"}`)
	require.Equal(t, 403, r.Status, r.Raw)
	assert.Contains(t, r.Raw, `"forbidden_path"`)
	assert.Contains(t, r.Raw, "--s3-bucket bkt")
	assert.Contains(t, r.Raw, "s3_buckets")

	_, ts := newTestServer(t, Config{S3Buckets: []string{"allowed", "also.allowed"}})
	long := strings.Repeat("k", 1025)
	for _, c := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{"path":"s3://other/a.faiss"}`, 403, `bucket \"other\" is not in the allowed S3 buckets`},
		{`{"path":"s3://allowed.evil/a.faiss"}`, 403, `bucket \"allowed.evil\" is not in the allowed`},
		{`{"path":"s3://ALLOWED/a.faiss"}`, 403, `bucket \"ALLOWED\" is not in the allowed`},
		{`{"path":"s3://allowed/../other/a.faiss"}`, 400, `\"..\" segment`},
		{`{"path":"s3://allowed/a/./b"}`, 400, `\".\" segment`},
		{`{"path":"s3://allowed/a\u0000b"}`, 400, "control character"},
		{`{"path":"s3://allowed/a\nb"}`, 400, "control character"},
		{`{"path":"s3://allowed/"}`, 400, "bucket and key both non-empty"},
		{`{"path":"s3:///key"}`, 400, "bucket and key both non-empty"},
		{`{"path":"s3://a/key"}`, 400, "3 to 63"},
		{`{"path":"s3://allowed/` + long + `"}`, 400, "1025 bytes long"},
		{`{"path":"s3://allowed/` + strings.Repeat("k", 5000) + `"}`, 400, "longer than 4096"},
		{`{"path":"idmap_hnsw.faiss","vectors_path":"s3://other/v.fvecs"}`, 403, `bucket \"other\"`},
		{`{"path":"idmap_hnsw.faiss","rerank":{"vectors_path":"s3://other/v.fvecs"}}`, 403, `bucket \"other\"`},
	} {
		r := call(t, ts, "PUT", "/indexes/x", c.body)
		assert.Equal(t, c.status, r.Status, "%.200s: %s", c.body, r.Raw)
		assert.Contains(t, r.Raw, c.msg, "%.200s", c.body)
		assert.Less(t, len(r.Raw), 1000, "an absurd path is not echoed whole")
	}
	assert.Equal(t, 404, call(t, ts, "GET", "/indexes/x", ``).Status, "nothing loaded")

	// A server of objects only: no data root, local paths refused.
	_, objs := newTestServer(t, Config{DataRoots: []string{}, S3Buckets: []string{"allowed"}})
	r = call(t, objs, "PUT", "/indexes/x", `{"path":"/etc/passwd"}`)
	assert.Equal(t, 403, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "no data root is configured")

	_, err := New(Config{})
	assert.ErrorContains(t, err, "at least one data root (or S3 bucket)")
	_, err = New(Config{S3Buckets: []string{"ok-bucket", "bad/bucket"}})
	assert.ErrorContains(t, err, `bucket name "bad/bucket" holds "/"`)
}

// s3Server serves the fixtures' directory and an S3 bucket holding copies
// of the named fixtures (under idx/), and returns the bucket.
func s3Server(t *testing.T, cfg Config, names ...string) (*Server, *httptest.Server, string) {
	bucket := s3test.Bucket(t)
	for _, n := range names {
		s3test.PutFile(t, bucket, "idx/"+n, filepath.Join(fixtures, n))
	}
	cfg.S3Buckets = []string{bucket}
	s, ts := newTestServer(t, cfg)
	return s, ts, bucket
}

// answers searches index with every query of fixture f (k 10, ef_search
// 32, and a filter) and returns the raw hits.
func answers(t *testing.T, ts *httptest.Server, index string, f fixtureRuns) []string {
	t.Helper()
	var out []string
	for _, q := range f.Queries {
		for _, extra := range []string{`,"method_parameters":{"ef_search":32}`, `,"filter":{"ids":[1,3,5,7,9,11,13,15,17,19,21,23,25,27,29]}`} {
			r := call(t, ts, "POST", "/indexes/"+index+"/_search", fmt.Sprintf(`{"vector":%s,"k":10%s}`, vectorJSON(q), extra))
			require.Equal(t, 200, r.Status, "%s: %s", index, r.Raw)
			out = append(out, hitsKey(r.Raw))
		}
	}
	return out
}

// TestS3EveryMode: an index at s3:// serves through REST in mode full
// (downloaded whole), memory_efficient (behind a block cache, any file
// backend named) and memory_efficient under a memory budget, and through
// mode switches back and forth, answering exactly what the same file
// loaded from local disk answers (and FAISS's results); the node's memory
// budget charges it by the object's size; a missing object is a 404 as a
// missing file is.
func TestS3EveryMode(t *testing.T) {
	names := []string{"idmap_hnsw.faiss", "hnsw_flat_large.faiss"}
	_, ts, bucket := s3Server(t, Config{}, names...)
	for _, name := range names {
		stem := strings.TrimSuffix(name, ".faiss")
		f := loadRuns(t, stem)
		f.Queries = f.Queries[:min(len(f.Queries), 4)] // every read a GET in some modes: a few queries
		u := "s3://" + bucket + "/idx/" + name
		budget := policyBudget(t, name, 64<<10)
		specs := []string{
			`"mode":"full"`,
			`"mode":"memory_efficient"`,
			`"mode":"memory_efficient","backend":"pread","cache_bytes":131072`,
			`"mode":"memory_efficient","backend":"direct"`,
			fmt.Sprintf(`"mode":"memory_efficient","memory_budget":%d`, budget),
		}
		for i, spec := range specs {
			if name == "hnsw_flat_large.faiss" && strings.Contains(spec, `"direct"`) {
				continue // the object alone, every read a GET: the budget's case reads it so, in batches
			}
			sem := `,"semantics":"faiss-1.7.3","kernel":"exact"`
			r := call(t, ts, "PUT", "/indexes/local", `{"path":"`+name+`",`+spec+sem+`}`)
			require.Equal(t, 200, r.Status, r.Raw)
			want := answers(t, ts, "local", f)
			localResident := r.Body["resident_bytes"]
			r = call(t, ts, "PUT", "/indexes/remote", `{"path":"`+u+`",`+spec+sem+`}`)
			require.Equal(t, 200, r.Status, "%s %s: %s", name, spec, r.Raw)
			assert.Equal(t, u, r.Body["path"])
			assert.Equal(t, "serving", r.Body["state"])
			if i == 0 || i == 4 {
				assert.Equal(t, localResident, r.Body["resident_bytes"], "%s %s: charged as the local file", name, spec)
			}
			got := answers(t, ts, "remote", f)
			assert.Equal(t, want, got, "%s %s: answers of the local file", name, spec)
			// FAISS's own results (k 10, the file's efSearch).
			run := f.Runs[1]
			require.Equal(t, 10, run.K)
			for qi, q := range f.Queries {
				r := call(t, ts, "POST", "/indexes/remote/_search", fmt.Sprintf(`{"vector":%s,"k":10}`, vectorJSON(q)))
				require.Equal(t, 200, r.Status, r.Raw)
				hits := r.Body["hits"].([]any)
				for j, id := range run.IDs[qi] {
					if id >= 0 {
						assert.Equal(t, float64(id), hits[j].(map[string]any)["id"], "%s %s query %d rank %d", name, spec, qi, j)
					}
				}
			}
			require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/local", ``).Status)
			require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/remote", ``).Status)
		}

		// Switches while serving: every mode in turn, each checked.
		r := call(t, ts, "PUT", "/indexes/remote", `{"path":"`+u+`","semantics":"faiss-1.7.3","kernel":"exact"}`)
		require.Equal(t, 200, r.Status, r.Raw)
		want := answers(t, ts, "remote", f)
		for _, sw := range []string{`{"mode":"full"}`, fmt.Sprintf(`{"mode":"memory_efficient","memory_budget":%d}`, budget),
			`{"mode":"memory_efficient","backend":"pread"}`, `{"mode":"full"}`, `{"mode":"memory_efficient","warm":true}`} {
			r := call(t, ts, "PUT", "/indexes/remote/_mode", sw)
			require.Equal(t, 200, r.Status, "%s %s: %s", name, sw, r.Raw)
			assert.Equal(t, u, r.Body["path"])
			assert.Equal(t, want, answers(t, ts, "remote", f), "%s after %s", name, sw)
		}
		require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/remote", ``).Status)
	}

	// A missing object answers as a missing local file does.
	local := call(t, ts, "PUT", "/indexes/m", `{"path":"missing.faiss"}`)
	remote := call(t, ts, "PUT", "/indexes/m", `{"path":"s3://`+bucket+`/idx/missing.faiss"}`)
	require.Equal(t, 404, local.Status, local.Raw)
	assert.Equal(t, local.Status, remote.Status, remote.Raw)
	assert.Equal(t, local.Body["error"].(map[string]any)["type"], remote.Body["error"].(map[string]any)["type"])
	assert.Contains(t, remote.Raw, "s3://"+bucket+"/idx/missing.faiss")
	assert.Contains(t, remote.Raw, "no such object")
}

// TestS3MemoryBudget: the node's memory budget charges an object as it
// charges a file: by the object's size for mode full.
func TestS3MemoryBudget(t *testing.T) {
	name := "hnsw_flat_large.faiss"
	fi, err := os.Stat(filepath.Join(fixtures, name))
	require.NoError(t, err)
	_, ts, bucket := s3Server(t, Config{MemoryBudget: fi.Size() / 2}, name)
	u := "s3://" + bucket + "/idx/" + name
	r := call(t, ts, "PUT", "/indexes/x", `{"path":"`+u+`","mode":"full"}`)
	require.Equal(t, 400, r.Status, r.Raw) // more than the node's whole budget
	assert.Contains(t, r.Raw, "memory_budget_exceeded")
	local := call(t, ts, "PUT", "/indexes/x", `{"path":"`+name+`","mode":"full"}`)
	assert.Equal(t, local.Raw, r.Raw, "the same numbers as for the local file")
	r = call(t, ts, "PUT", "/indexes/x", `{"path":"`+u+`","mode":"memory_efficient","cache_bytes":65536}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Less(t, r.Body["resident_bytes"].(float64), float64(fi.Size()/2))
}

// TestS3MetricsAndSecrets: /metrics exports the S3 request metrics, which
// move with the server's requests; neither they, nor error bodies, nor
// the logs ever hold the access key or the secret key, even when the
// credentials are refused.
func TestS3MetricsAndSecrets(t *testing.T) {
	s3test.Endpoint(t)
	var logs bytes.Buffer
	cfg := Config{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	_, ts, bucket := s3Server(t, cfg, "idmap_hnsw.faiss")
	u := "s3://" + bucket + "/idx/idmap_hnsw.faiss"
	before := s3.ReadMetrics()
	r := call(t, ts, "PUT", "/indexes/x", `{"path":"`+u+`","mode":"memory_efficient","backend":"direct"}`)
	require.Equal(t, 200, r.Status, r.Raw)
	f := loadRuns(t, "idmap_hnsw")
	answers(t, ts, "x", f)
	after := s3.ReadMetrics()
	assert.Greater(t, after.GETs, before.GETs)
	assert.Greater(t, after.ReceivedBytes, before.ReceivedBytes)
	m := call(t, ts, "GET", "/metrics", ``).Raw
	for _, want := range []string{
		`faiss_sidecar_s3_requests_total{method="GET"}`, `faiss_sidecar_s3_requests_total{method="HEAD"}`,
		"faiss_sidecar_s3_received_bytes_total ", "faiss_sidecar_s3_retries_total ",
		`faiss_sidecar_s3_get_seconds_bucket{le="0.001"}`, `faiss_sidecar_s3_get_seconds_bucket{le="+Inf"}`, "faiss_sidecar_s3_get_seconds_count ",
	} {
		assert.Contains(t, m, want)
	}
	for _, k := range s3.ErrorKinds {
		assert.Contains(t, m, `faiss_sidecar_s3_errors_total{kind="`+k+`"}`)
	}
	assert.NotContains(t, m, `faiss_sidecar_s3_requests_total{method="GET"} 0`+"\n")

	// Wrong credentials: a fresh client (another server's, through a
	// proxy) reads the variables anew; it logs to the same place.
	key, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	require.NotEmpty(t, key)
	require.NotEmpty(t, secret)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-0badc0ffee")
	cfg.Env = s3Env(s3.Options{Endpoint: s3test.NewFaultProxy(t).URL, MaxAttempts: 2, Backoff: time.Millisecond})
	cfg.S3Buckets = []string{bucket}
	_, ts2 := newTestServer(t, cfg)
	r = call(t, ts2, "PUT", "/indexes/y", `{"path":"`+u+`"}`)
	assert.Equal(t, 502, r.Status, r.Raw)
	assert.Contains(t, r.Raw, "object_storage_error")
	assert.Contains(t, r.Raw, "403")
	assert.Contains(t, r.Raw, u)
	m = call(t, ts, "GET", "/metrics", ``).Raw
	assert.NotRegexp(t, `faiss_sidecar_s3_errors_total\{kind="4xx"\} 0\n`, m)
	for _, text := range []string{r.Raw, m, logs.String(), call(t, ts, "GET", "/indexes", ``).Raw, call(t, ts, "GET", "/_health", ``).Raw,
		call(t, ts2, "GET", "/metrics", ``).Raw, call(t, ts2, "GET", "/indexes", ``).Raw, call(t, ts2, "GET", "/_health", ``).Raw} {
		assert.NotContains(t, text, secret)
		assert.NotContains(t, text, key)
		assert.NotContains(t, text, "wrong-secret-0badc0ffee")
	}
	assert.Contains(t, logs.String(), "index loaded", "the logs were captured")
}

// metricValue is the value of the sample line that starts with series in
// a /metrics answer (-1 when absent).
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err, line)
			return f
		}
	}
	return -1
}

// TestS3TierMetrics: with a disk cache, /metrics says per index where its
// block reads were served: cold (from the store) on the first load, from
// the disk once another load of the same object finds its blocks there,
// from memory on repeats; and the directory's usage within its budget. A
// local file has no such series.
func TestS3TierMetrics(t *testing.T) {
	_, ts, bucket := s3Server(t, Config{CacheDir: t.TempDir(), CacheDirBytes: 64 << 20}, "hnsw_flat_large.faiss")
	u := "s3://" + bucket + "/idx/hnsw_flat_large.faiss"
	f := loadRuns(t, "hnsw_flat_large")
	f.Queries = f.Queries[:4]
	r := call(t, ts, "PUT", "/indexes/first", `{"path":"`+u+`","cache_bytes":1048576}`)
	require.Equal(t, 200, r.Status, r.Raw)
	want := answers(t, ts, "first", f)
	m := call(t, ts, "GET", "/metrics", ``).Raw
	assert.Positive(t, metricValue(t, m, `faiss_sidecar_s3_tier_reads_total{index="first",tier="cold"}`), m)
	assert.Positive(t, metricValue(t, m, `faiss_sidecar_s3_tier_bytes_total{index="first",tier="cold"}`))
	assert.Positive(t, metricValue(t, m, `faiss_sidecar_s3_tier_reads_total{index="first",tier="memory"}`))
	assert.Zero(t, metricValue(t, m, `faiss_sidecar_s3_disk_cache_corrupt_blocks_total{index="first"}`))
	assert.Zero(t, metricValue(t, m, `faiss_sidecar_s3_disk_cache_write_errors_total{index="first"}`))
	used := metricValue(t, m, "faiss_sidecar_s3_disk_cache_used_bytes")
	assert.Positive(t, used)
	assert.LessOrEqual(t, used, float64(64<<20))
	assert.Equal(t, float64(64<<20), metricValue(t, m, "faiss_sidecar_s3_disk_cache_budget_bytes"))

	require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/first", ``).Status)
	r = call(t, ts, "PUT", "/indexes/second", `{"path":"`+u+`","cache_bytes":1048576}`)
	require.Equal(t, 200, r.Status, r.Raw)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/local", `{"path":"hnsw_flat_large.faiss","backend":"pread"}`).Status)
	assert.Equal(t, want, answers(t, ts, "second", f))
	m = call(t, ts, "GET", "/metrics", ``).Raw
	assert.Positive(t, metricValue(t, m, `faiss_sidecar_s3_tier_reads_total{index="second",tier="disk"}`), m)
	assert.Equal(t, -1.0, metricValue(t, m, `faiss_sidecar_s3_tier_reads_total{index="first",tier="cold"}`), "a deleted index's series go")
	assert.NotContains(t, m, `faiss_sidecar_s3_tier_reads_total{index="local"`, "a local file has no tiers")
	assert.Contains(t, m, `faiss_sidecar_index_failed{index="local"} 0`, "the local index is served")
}

// TestS3ReloadAfterReplaced: the object replaced under a served index
// (other vectors, a new ETag), a switch to the same mode at once is the
// reload the 503 names: the old handle cannot answer, so no check query
// compares them, and the index then serves the new version.
func TestS3ReloadAfterReplaced(t *testing.T) {
	_, ts, bucket := s3Server(t, Config{}, "hnsw_flat_large.faiss")
	u := "s3://" + bucket + "/idx/hnsw_flat_large.faiss"
	f := loadRuns(t, "hnsw_flat_large")
	f.Queries = f.Queries[:3]
	r := call(t, ts, "PUT", "/indexes/r", `{"path":"`+u+`","cache_bytes":1}`)
	require.Equal(t, 200, r.Status, r.Raw)
	before := answers(t, ts, "r", f)

	b, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_large.faiss"))
	require.NoError(t, err)
	for i := len(b) - 400000; i < len(b)-1000; i++ { // vectors changed
		b[i] ^= 0x55
	}
	s3test.Put(t, bucket, "idx/hnsw_flat_large.faiss", b)
	r = call(t, ts, "PUT", "/indexes/r/_mode", `{"mode":"memory_efficient","cache_bytes":1}`)
	require.Equal(t, 200, r.Status, "the reload: %s", r.Raw)
	after := answers(t, ts, "r", f)
	assert.NotEqual(t, before, after, "the new version's vectors")

	// The same through a local copy of the new bytes: the new version's answers.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new.faiss"), b, 0o644))
	_, lts := newTestServer(t, Config{DataRoots: []string{dir}})
	require.Equal(t, 200, call(t, lts, "PUT", "/indexes/r", `{"path":"new.faiss","cache_bytes":1}`).Status)
	assert.Equal(t, after, answers(t, lts, "r", f))
}
