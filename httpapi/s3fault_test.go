package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// faultTally is what the clients saw of one index during one phase.
type faultTally struct {
	ok, storageErr, changed atomic.Int64
}

// s3FaultTimeout is each GET's timeout in TestS3FaultsUnderLoad: long
// enough that the loads' plain GETs succeed within the three-timeout
// budget on a loaded machine (-race, other packages' tests beside it),
// and short enough that the stall (5 s) stays past it with the faults'
// proportions kept.
const s3FaultTimeout = 2 * time.Second

// TestS3FaultsUnderLoad is the server-level fault test of objects served
// from S3: the server serves three indexes at s3:// through a proxy that
// injects faults (latency, connection resets, 503 SlowDown, stalls past
// the per-request timeout, truncated bodies, the server down and back, a
// server throttling for good, the object replaced) while clients query
// them and two local indexes. Throughout: no wrong answer (every 200 is
// the local file's answer), a fault that ends within the attempts is
// retried to success, one that does not is a 502 object_storage_error
// naming the object and the cause, a replaced object is a 503
// index_file_changed as a changed local file is (and a reload serves the
// new version), the local indexes always answer, and the server stays up.

func TestS3FaultsUnderLoad(t *testing.T) {
	fp := s3test.NewFaultProxy(t)
	const attempts = 4
	env := s3Env(s3.Options{Endpoint: fp.URL, Timeout: s3FaultTimeout, MaxAttempts: attempts, Backoff: 2 * time.Millisecond})
	large, small := "hnsw_flat_large.faiss", "idmap_hnsw.faiss"
	_, ts, bucket := s3Server(t, Config{Env: env}, large, small)
	obj := func(n string) string { return "s3://" + bucket + "/idx/" + n }
	loads := map[string]string{
		"local-large": `{"path":"` + large + `"}`,
		"local-small": `{"path":"` + small + `"}`,
		// A cache smaller than the file: queries keep fetching blocks.
		"s3-cache": `{"path":"` + obj(large) + `","backend":"pread","cache_bytes":1048576}`,
		// The bounded-memory policy: the object alone, misses in parallel batches.
		"s3-budget": fmt.Sprintf(`{"path":"%s","memory_budget":%d}`, obj(large), policyBudget(t, large, 64<<10)),
		// The object alone: every read a GET.
		"s3-small": `{"path":"` + obj(small) + `","backend":"direct"}`,
	}
	for name, body := range loads {
		r := call(t, ts, "PUT", "/indexes/"+name, body)
		require.Equal(t, 200, r.Status, "%s: %s", name, r.Raw)
	}
	file := map[string]string{"local-large": large, "local-small": small, "s3-cache": large, "s3-budget": large, "s3-small": small}
	queries := map[string][]string{}
	want := map[string][]string{}
	for _, n := range []string{large, small} {
		f := loadRuns(t, strings.TrimSuffix(n, ".faiss"))
		for _, q := range f.Queries {
			queries[n] = append(queries[n], fmt.Sprintf(`{"vector":%s,"k":10,"method_parameters":{"ef_search":16}}`, vectorJSON(q)))
		}
	}
	for _, idx := range []string{"local-large", "local-small"} {
		for _, b := range queries[file[idx]] {
			r := call(t, ts, "POST", "/indexes/"+idx+"/_search", b)
			require.Equal(t, 200, r.Status, r.Raw)
			want[file[idx]] = append(want[file[idx]], hitsKey(r.Raw))
		}
	}
	indexes := []string{"s3-cache", "s3-budget", "s3-small", "local-large", "local-small"}

	var (
		phase   atomic.Pointer[map[string]*faultTally]
		replace atomic.Bool // s3-small's object has been replaced
		bad     atomic.Value
		stop    atomic.Bool
		wg      sync.WaitGroup
		client  = &http.Client{Timeout: 30 * time.Second}
	)
	newPhase := func() map[string]*faultTally {
		m := map[string]*faultTally{}
		for _, idx := range indexes {
			m[idx] = &faultTally{}
		}
		phase.Store(&m)
		return m
	}
	newPhase()
	fail := func(format string, a ...any) { bad.CompareAndSwap(nil, fmt.Sprintf(format, a...)) }
	// Two clients per index at s3://, one per local index: a slow object
	// store never holds up the local indexes' clients.
	for c, idx := range []string{"s3-cache", "s3-cache", "s3-budget", "s3-budget", "s3-small", "s3-small", "local-large", "local-small"} {
		wg.Go(func() {
			for i := c; !stop.Load(); i++ {
				qs := queries[file[idx]]
				qi := i % len(qs)
				tally := (*phase.Load())[idx]
				res, err := client.Post(ts.URL+"/indexes/"+idx+"/_search", "application/json", strings.NewReader(qs[qi]))
				if err != nil {
					fail("%s: the server did not answer: %v", idx, err)
					return
				}
				raw, _ := io.ReadAll(res.Body)
				res.Body.Close()
				body := string(raw)
				switch {
				case res.StatusCode == 200 && hitsKey(body) == want[file[idx]][qi]:
					tally.ok.Add(1)
				case res.StatusCode == 502 && strings.HasPrefix(idx, "s3-") && strings.Contains(body, `"object_storage_error"`) &&
					strings.Contains(body, obj(file[idx])) && strings.Contains(body, fmt.Sprintf("(%d attempts)", attempts)):
					tally.storageErr.Add(1)
				case res.StatusCode == 503 && idx == "s3-small" && replace.Load() && strings.Contains(body, `"index_file_changed"`):
					tally.changed.Add(1)
				default:
					fail("%s query %d: %d %.400s", idx, qi, res.StatusCode, body)
				}
			}
		})
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })

	// faultOnce fails each range twice per phase, then lets it through
	// (fewer failures than attempts, so every read must succeed), up to
	// limit faults.
	faultOnce := func(limit int64, f func(w http.ResponseWriter, r *http.Request)) (s3test.Fault, *atomic.Int64) {
		var mu sync.Mutex
		seen := map[string]int{}
		var injected atomic.Int64
		return func(_ int64, w http.ResponseWriter, r *http.Request) bool {
			mu.Lock()
			seen[r.URL.Path+r.Header.Get("Range")]++
			k := seen[r.URL.Path+r.Header.Get("Range")]
			mu.Unlock()
			if k > 2 {
				return false
			}
			if injected.Add(1) > limit {
				injected.Add(-1)
				return false
			}
			f(w, r)
			return true
		}, &injected
	}
	run := func(d time.Duration) map[string]*faultTally {
		m := newPhase()
		time.Sleep(d)
		return m
	}
	// runUntilServed runs a phase for d at least, and until every index
	// has answered a query started in it.
	runUntilServed := func(name string, d time.Duration, except ...string) map[string]*faultTally {
		m := run(d)
		served := func() bool {
			for _, idx := range indexes {
				if m[idx].ok.Load() == 0 && bad.Load() == nil && !slices.Contains(except, idx) {
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(60 * time.Second); !served(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: an index answered no query in a minute: (ok, 502, 503) %v", name, tallies(m))
			}
		}
		return m
	}
	checkAllGood := func(name string, m map[string]*faultTally) {
		t.Helper()
		require.Nil(t, bad.Load(), "%s: a wrong answer or an unclear error", name)
		for _, idx := range indexes {
			assert.Zero(t, m[idx].storageErr.Load(), "%s: %s: a fault that ends within the attempts must be retried to success", name, idx)
			assert.Positive(t, m[idx].ok.Load(), "%s: %s answered nothing", name, idx)
		}
	}
	before := s3.ReadMetrics()

	var delayed atomic.Int64
	latency := func(_ int64, _ http.ResponseWriter, _ *http.Request) bool { // every GET, passed on late
		delayed.Add(1)
		time.Sleep(20 * time.Millisecond)
		return false
	}
	phases := []struct {
		name     string
		fault    s3test.Fault
		injected *atomic.Int64
	}{{"latency", latency, &delayed}}
	for _, p := range []struct {
		name string

		limit int64
		f     func(w http.ResponseWriter, r *http.Request)
	}{
		{"connection reset", 200, func(w http.ResponseWriter, _ *http.Request) { s3test.Reset(w) }},
		{"503 SlowDown", 200, func(w http.ResponseWriter, _ *http.Request) { s3test.SlowDown(w) }},
		{"500", 200, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }},
		{"truncated body", 200, func(w http.ResponseWriter, _ *http.Request) { s3test.Truncated(w) }},
		{"stall past the timeout", 8, func(_ http.ResponseWriter, r *http.Request) { s3test.Stall(r, 5*time.Second) }},
	} {
		f, injected := faultOnce(p.limit, p.f)
		phases = append(phases, struct {
			name     string
			fault    s3test.Fault
			injected *atomic.Int64
		}{p.name, f, injected})
	}
	for _, p := range phases {
		fp.Set(p.fault)
		m := runUntilServed(p.name, 500*time.Millisecond)
		fp.Clear()
		checkAllGood(p.name, m)
		assert.Positive(t, p.injected.Load(), "%s: no fault injected", p.name)
		t.Logf("%s: %d faults injected; answers (ok, 502, 503) %v", p.name, p.injected.Load(), tallies(m))
	}

	// The server down, then back on the same address.
	fp.Stop()
	down := run(500 * time.Millisecond)
	// A query fails only once its attempts are used up, which on a loaded
	// machine can be after the phase's time: wait for one, still down.
	for deadline := time.Now().Add(60 * time.Second); down["s3-small"].storageErr.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	fp.Start(t)
	require.Nil(t, bad.Load())
	assert.Positive(t, down["s3-small"].storageErr.Load(), "reads while the server is down fail, clearly")
	for _, idx := range []string{"local-large", "local-small"} {
		assert.Positive(t, down[idx].ok.Load(), "%s serves while the object store is down", idx)
	}
	time.Sleep(100 * time.Millisecond) // queries started while it was down end
	back := runUntilServed("after the restart", 300*time.Millisecond)
	checkAllGood("after the restart", back)
	for _, idx := range []string{"s3-cache", "s3-budget", "s3-small"} {
		r := call(t, ts, "GET", "/indexes/"+idx, ``)
		assert.Equal(t, "serving", r.Body["state"], "%s: an outage is not a changed file: %s", idx, r.Raw)
	}
	t.Logf("down: %v; back: %v", tallies(down), tallies(back))

	// A server throttling for good: a clear error after the attempts.
	fp.Set(func(_ int64, w http.ResponseWriter, _ *http.Request) bool { s3test.SlowDown(w); return true })
	throttled := run(300 * time.Millisecond)
	fp.Clear()
	require.Nil(t, bad.Load())
	assert.Positive(t, throttled["s3-small"].storageErr.Load())
	r := call(t, ts, "PUT", "/indexes/throttled", `{"path":"`+obj(small)+`"}`)
	require.Equal(t, 200, r.Status, "a load once the server answers again: %s", r.Raw)
	fp.Set(func(_ int64, w http.ResponseWriter, _ *http.Request) bool { s3test.SlowDown(w); return true })
	r = call(t, ts, "PUT", "/indexes/throttled2", `{"path":"`+obj(small)+`"}`)
	fp.Clear()
	assert.Equal(t, 502, r.Status, r.Raw)
	for _, s := range []string{"object_storage_error", obj(small), "(4 attempts)", "503", "SlowDown"} {
		assert.Contains(t, r.Raw, s)
	}
	time.Sleep(100 * time.Millisecond)
	checkAllGood("after throttling", runUntilServed("after throttling", 300*time.Millisecond))

	// The object replaced under s3-small: 503 index_file_changed, as a
	// changed local file; every other index keeps serving.
	other := filepath.Join(fixtures, "idmap2_hnsw.faiss")
	replace.Store(true)
	s3test.PutFile(t, bucket, "idx/"+small, other)
	changed := runUntilServed("replaced", 0, "s3-small")
	require.Eventually(t, func() bool {
		return changed["s3-small"].changed.Load() > 0
	}, 5*time.Second, 10*time.Millisecond)
	require.Nil(t, bad.Load())
	assert.Positive(t, changed["s3-small"].changed.Load())
	for _, idx := range []string{"s3-cache", "s3-budget", "local-large", "local-small"} {
		assert.Positive(t, changed[idx].ok.Load(), "%s serves while another object changed", idx)
		assert.Zero(t, changed[idx].storageErr.Load(), idx)
	}
	info := call(t, ts, "GET", "/indexes/s3-small", ``)
	assert.Equal(t, "failed", info.Body["state"], info.Raw)
	assert.Contains(t, info.Body["failure"], obj(small))
	assert.Contains(t, call(t, ts, "GET", "/metrics", ``).Raw, `faiss_sidecar_index_failed{index="s3-small"} 1`)

	stop.Store(true)
	wg.Wait()
	require.Nil(t, bad.Load())

	// A reload serves the new version: the answers of the new file loaded
	// from local disk.
	r = call(t, ts, "PUT", "/indexes/s3-small/_mode", `{}`)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "serving", r.Body["state"])
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/local-other", `{"path":"idmap2_hnsw.faiss","backend":"direct"}`).Status)
	for _, b := range queries[small] {
		got := call(t, ts, "POST", "/indexes/s3-small/_search", b)
		exp := call(t, ts, "POST", "/indexes/local-other/_search", b)
		require.Equal(t, 200, got.Status, got.Raw)
		assert.Equal(t, hitsKey(exp.Raw), hitsKey(got.Raw))
	}

	d := delta(before, s3.ReadMetrics())
	t.Logf("S3 metrics over the run: %+v", d)
	assert.Positive(t, d.Retries)
	for _, k := range []string{s3.KindThrottled, s3.KindServer, s3.KindConnection, s3.KindTimeout, s3.KindChanged} {
		assert.Positive(t, d.Errors[k], "errors of kind %s", k)
	}
	assert.Equal(t, 200, call(t, ts, "GET", "/_health", ``).Status)
}

func tallies(m map[string]*faultTally) map[string][3]int64 {
	out := map[string][3]int64{}
	for k, v := range m {
		out[k] = [3]int64{v.ok.Load(), v.storageErr.Load(), v.changed.Load()}
	}
	return out
}

// delta is what the process's S3 counters moved by since before.
func delta(before, after s3.Metrics) s3.Metrics {
	d := s3.Metrics{GETs: after.GETs - before.GETs, HEADs: after.HEADs - before.HEADs,
		ReceivedBytes: after.ReceivedBytes - before.ReceivedBytes, Retries: after.Retries - before.Retries,
		Errors: map[string]int64{}}
	for k, v := range after.Errors {
		d.Errors[k] = v - before.Errors[k]
	}
	return d
}

// TestStalledIndexLeavesOthersSlots: an index whose object store stops
// answering holds at most its share of the server's search slots and
// queue (three quarters): its searches beyond that are told to retry at
// once, and a local index keeps answering at once meanwhile rather than
// getting 429s behind the stalled searches, as does GET of the stalled
// index (it makes no request to the store).
func TestStalledIndexLeavesOthersSlots(t *testing.T) {
	fp := s3test.NewFaultProxy(t)
	env := s3Env(s3.Options{Endpoint: fp.URL, Timeout: 800 * time.Millisecond, MaxAttempts: 2, Backoff: time.Millisecond})
	large := "hnsw_flat_large.faiss"
	_, ts, bucket := s3Server(t, Config{Limits: Limits{MaxConcurrentSearches: 4, MaxQueuedSearches: 4}, Env: env}, large)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/slow", `{"path":"s3://`+bucket+`/idx/`+large+`","backend":"direct"}`).Status)
	require.Equal(t, 200, call(t, ts, "PUT", "/indexes/local", `{"path":"`+large+`"}`).Status)
	f := loadRuns(t, "hnsw_flat_large")
	body := fmt.Sprintf(`{"vector":%s,"k":10}`, vectorJSON(f.Queries[0]))
	fp.Set(func(_ int64, _ http.ResponseWriter, r *http.Request) bool {
		s3test.Stall(r, 10*time.Second)
		return true
	})
	defer fp.Clear()
	var wg sync.WaitGroup
	codes := make(chan int, 12)
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- call(t, ts, "POST", "/indexes/slow/_search", body).Status
		}()
	}
	require.Eventually(t, func() bool { return len(codes) >= 6 }, 5*time.Second, 5*time.Millisecond, "beyond the share: refused at once")
	for range 3 {
		start := time.Now()
		r := call(t, ts, "POST", "/indexes/local/_search", body)
		require.Equal(t, 200, r.Status, r.Raw)
		assert.Less(t, time.Since(start), 500*time.Millisecond, "the local index answers at once")
	}
	start := time.Now()
	require.Equal(t, 200, call(t, ts, "GET", "/indexes/slow", ``).Status)
	assert.Less(t, time.Since(start), 500*time.Millisecond, "GET of the stalled index asks the store nothing")
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	assert.Equal(t, 6, n[429], "%v: 6 of 12 within the share of 6 (3/4 of 4+4)", n)
	assert.Equal(t, 6, n[502], "%v: the stalled ones end as the store's fault", n)
}
