package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// envServeHelper makes the test binary run `faiss-sidecar` with the
// arguments after "--" (TestServeHelperProcess), so a test can start
// servers as processes of their own.
const envServeHelper = "FAISS_SIDECAR_TEST_SERVE_HELPER"

// TestServeHelperProcess is not a test: it is the entry point of the
// processes TestServeReplicas starts.
func TestServeHelperProcess(t *testing.T) {
	if os.Getenv(envServeHelper) != "1" {
		t.Skip("the entry point of the server processes TestServeReplicas starts")
	}
	i := slices.Index(os.Args, "--")
	os.Exit(run(os.Args[i+1:], os.Stdout, os.Stderr))
}

// replica is a `serve` process.
type replica struct {
	url    string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{} // closed once the process has been waited for
}

// startReplica starts `faiss-sidecar serve args…` as a process of its own
// on a free address and waits until it answers /_health.
func startReplica(t *testing.T, args ...string) *replica {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestServeHelperProcess$", "--", "serve", "--listen", addr}, args...)...)
	cmd.Env = append(os.Environ(), envServeHelper+"=1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	r := &replica{url: "http://" + addr, cmd: cmd, out: out, exited: exited}
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill() // a no-op once it has stopped
		<-exited
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(r.url + "/_health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return r
			}
		}
		select {
		case <-exited:
			t.Fatalf("serve %v exited: %s", args, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %v did not come up: %s", args, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends a request to the replica and returns the status and body.
func (r *replica) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, r.url+path, strings.NewReader(body))
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s", r.out)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// stop sends SIGINT and requires a graceful exit.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(os.Interrupt))
	select {
	case <-r.exited:
		assert.True(t, r.cmd.ProcessState.Success(), "serve exited %v: %s", r.cmd.ProcessState, r.out)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop: %s", r.out)
	}
}

// hits is the "hits" of a search answer, as sent.
func hits(t *testing.T, body string) string {
	var r struct {
		Hits json.RawMessage `json:"hits"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &r), body)
	require.NotEmpty(t, r.Hits, body)
	return string(r.Hits)
}

// TestServeReplicas: two `serve` processes serving the same S3 object (one
// allowed its bucket by --s3-bucket, the other by "s3_buckets" in its
// config file) answer the same queries identically, in modes full,
// memory_efficient and memory_efficient under a memory budget, and after
// switching modes, and their answers are those of the same file loaded
// from local disk (and FAISS's); they stop gracefully.
func TestServeReplicas(t *testing.T) {
	bucket := s3test.Bucket(t)
	names := []string{"hnsw_flat_large", "idmap_hnsw"}
	for _, n := range names {
		s3test.PutFile(t, bucket, "shared/"+n+".faiss", filepath.Join(fixtures, n+".faiss"))
	}
	root, err := filepath.Abs(fixtures)
	require.NoError(t, err)
	cfgPath := filepath.Join(t.TempDir(), "replica.json")
	cfg, err := json.Marshal(map[string]any{"data_roots": []string{root}, "s3_buckets": []string{bucket}, "log_level": "debug",
		"indexes": map[string]any{"large": map[string]any{"path": "s3://" + bucket + "/shared/hnsw_flat_large.faiss",
			"semantics": "faiss-1.7.3", "kernel": "exact"}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfgPath, cfg, 0o644))
	a := startReplica(t, "--config", cfgPath)
	b := startReplica(t, "--data-root", root, "--s3-bucket", bucket, "--log-level", "debug")
	status, body := b.do(t, "PUT", "/indexes/large", `{"path":"s3://`+bucket+`/shared/hnsw_flat_large.faiss","semantics":"faiss-1.7.3","kernel":"exact"}`)
	require.Equal(t, 200, status, body)

	sem := `"semantics":"faiss-1.7.3","kernel":"exact"`
	modes := []string{`"mode":"full"`, `"mode":"memory_efficient"`, `"mode":"memory_efficient","backend":"pread","cache_bytes":1048576`,
		`"mode":"memory_efficient","memory_budget":8000000`}
	compared := 0
	for _, n := range names {
		f := loadSearchFixture(t, n)
		f.Queries = f.Queries[:min(len(f.Queries), 6)] // reads are GETs in some modes: a few queries
		u := "s3://" + bucket + "/shared/" + n + ".faiss"
		var bodies []string
		for _, q := range f.Queries {
			v, _ := json.Marshal(q)
			bodies = append(bodies, fmt.Sprintf(`{"vector":%s,"k":10}`, v), fmt.Sprintf(`{"vector":%s,"k":5,"method_parameters":{"ef_search":24}}`, v))
		}
		// The local file's answers, from replica a.
		status, body := a.do(t, "PUT", "/indexes/local-"+n, `{"path":"`+n+`.faiss",`+sem+`}`)
		require.Equal(t, 200, status, body)
		var want []string
		for _, q := range bodies {
			status, body := a.do(t, "POST", "/indexes/local-"+n+"/_search", q)
			require.Equal(t, 200, status, body)
			want = append(want, hits(t, body))
		}
		// FAISS's own ids for k=10 at the file's efSearch.
		run := f.Runs[1]
		require.Equal(t, 10, run.K)
		require.Nil(t, run.EfSearch)
		require.Nil(t, run.AllowIDs)
		for qi := range f.Queries {
			var got []struct {
				ID int64 `json:"id"`
			}
			require.NoError(t, json.Unmarshal([]byte(want[2*qi]), &got))
			var ids []int64
			for _, h := range got {
				ids = append(ids, h.ID)
			}
			var faiss []int64
			for _, id := range run.IDs[qi] {
				if id >= 0 {
					faiss = append(faiss, id)
				}
			}
			require.Equal(t, faiss, ids, "%s query %d: the local file's answer is FAISS's", n, qi)
		}
		check := func(index, what string) {
			for i, q := range bodies {
				sa, ba := a.do(t, "POST", "/indexes/"+index+"/_search", q)
				sb, bb := b.do(t, "POST", "/indexes/"+index+"/_search", q)
				require.Equal(t, 200, sa, ba)
				require.Equal(t, 200, sb, bb)
				require.Equal(t, hits(t, ba), hits(t, bb), "%s %s query %d: the replicas differ", n, what, i)
				require.Equal(t, want[i], hits(t, ba), "%s %s query %d: not the local file's answer", n, what, i)
				compared++
			}
		}
		for _, mode := range modes {
			for _, r := range []*replica{a, b} {
				status, body := r.do(t, "PUT", "/indexes/"+n, `{"path":"`+u+`",`+mode+`,`+sem+`}`)
				require.Equal(t, 200, status, "%s %s: %s", n, mode, body)
			}
			check(n, mode)
			for _, r := range []*replica{a, b} {
				status, body := r.do(t, "DELETE", "/indexes/"+n, ``)
				require.Equal(t, 200, status, body)
			}
		}
		// The index both loaded at start, switched mode by mode.
		if n == "hnsw_flat_large" {
			check("large", "loaded at start")
			for _, sw := range []string{`{"mode":"full"}`, `{"mode":"memory_efficient","memory_budget":8000000}`, `{"mode":"memory_efficient","backend":"pread"}`} {
				for _, r := range []*replica{a, b} {
					status, body := r.do(t, "PUT", "/indexes/large/_mode", sw)
					require.Equal(t, 200, status, "%s: %s", sw, body)
				}
				check("large", "after "+sw)
			}
		}
	}
	assert.Positive(t, compared)
	for _, r := range []*replica{a, b} {
		status, body := r.do(t, "GET", "/metrics", ``)
		require.Equal(t, 200, status)
		assert.Contains(t, body, `faiss_sidecar_s3_requests_total{method="GET"}`)
		assert.NotContains(t, body, `faiss_sidecar_s3_requests_total{method="GET"} 0`+"\n", "the replica read the object")
		r.stop(t)
		logs := r.out.String()
		assert.Contains(t, logs, `"s3_buckets":["`+bucket+`"]`)
		for _, secret := range []string{os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_ACCESS_KEY_ID")} {
			require.NotEmpty(t, secret)
			assert.NotContains(t, logs, secret, "a credential in the logs")
			assert.NotContains(t, body, secret, "a credential in /metrics")
		}
	}
}

// TestServeS3BucketFlags: a malformed bucket name is a usage error; an
// s3 path outside the allowed buckets in the config's indexes stops the
// start with the 403's reason.
func TestServeS3BucketFlags(t *testing.T) {
	code, _, errOut := runCLI("serve", "--s3-bucket", "no/slash")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `bucket name "no/slash" holds "/"`)
	p := filepath.Join(t.TempDir(), "c.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"s3_buckets":["ok-bucket"],"indexes":{"x":{"path":"s3://other-bucket/x.faiss"}}}`), 0o644))
	code, _, errOut = runCLI("serve", "--config", p, "--listen", freeAddr(t))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `index x: s3://other-bucket/x.faiss: bucket "other-bucket" is not in the allowed S3 buckets`)
}
