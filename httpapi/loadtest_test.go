package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSwitchUnderLoad is the load test of the mode switch (loopback only,
// bounded in time): clients search continuously while the index moves
// full → mmap → pread → direct → full. Every response must be 2xx and equal
// to what the first mode returned; p50/p99 are reported before, during and
// after the switches. FAISS_SIDECAR_LOADTEST_PHASE sets each phase's length
// (default 300ms; e.g. 5s for a longer run with go test -v -run SwitchUnderLoad).
func TestSwitchUnderLoad(t *testing.T) {
	phase := 300 * time.Millisecond
	if v := os.Getenv("FAISS_SIDECAR_LOADTEST_PHASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		phase = d
	}
	_, ts := newTestServer(t, Config{})
	if r := call(t, ts, "PUT", "/indexes/lt", `{"path":"hnsw_flat_large.faiss","mode":"full"}`); r.Status != 200 {
		t.Fatal(r.Raw)
	}
	f := loadRuns(t, "hnsw_flat_large")
	bodies := make([][]byte, len(f.Queries))
	want := make([]string, len(f.Queries))
	for i, q := range f.Queries {
		bodies[i] = []byte(fmt.Sprintf(`{"vector":%s,"k":10,"method_parameters":{"ef_search":64}}`, vectorJSON(q)))
		r := call(t, ts, "POST", "/indexes/lt/_search", string(bodies[i]))
		want[i] = hitsKey(r.Raw)
	}
	type sample struct {
		at      time.Time
		latency time.Duration
	}
	var (
		stop             atomic.Bool
		requests, non2xx atomic.Int64
		differ           atomic.Int64
		mu               sync.Mutex
		samples          []sample
		wg               sync.WaitGroup
		firstBad         atomic.Value
		client           = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []sample
			for i := c; !stop.Load(); i++ {
				qi := i % len(bodies)
				t0 := time.Now()
				r, err := client.Post(ts.URL+"/indexes/lt/_search", "application/json", bytes.NewReader(bodies[qi]))
				if err != nil {
					non2xx.Add(1)
					firstBad.CompareAndSwap(nil, err.Error())
					continue
				}
				raw, _ := io.ReadAll(r.Body)
				r.Body.Close()
				mine = append(mine, sample{t0, time.Since(t0)})
				requests.Add(1)
				if r.StatusCode/100 != 2 {
					non2xx.Add(1)
					firstBad.CompareAndSwap(nil, string(raw))
				} else if hitsKey(string(raw)) != want[qi] {
					differ.Add(1)
				}
			}
			mu.Lock()
			samples = append(samples, mine...)
			mu.Unlock()
		}()
	}
	time.Sleep(phase)
	var windows [][2]time.Time
	for _, body := range []string{
		`{"mode":"memory_efficient","backend":"mmap"}`, `{"mode":"memory_efficient","backend":"pread","cache_bytes":4194304}`,
		`{"mode":"memory_efficient","backend":"direct"}`,
		// The bounded-memory policy with a vector cache small enough to
		// churn under the clients.
		fmt.Sprintf(`{"mode":"memory_efficient","backend":"direct","memory_budget":%d}`, policyBudget(t, "hnsw_flat_large.faiss", 400<<10)),
		`{"mode":"full"}`,
	} {
		start := time.Now()
		r := call(t, ts, "PUT", "/indexes/lt/_mode", body)
		windows = append(windows, [2]time.Time{start, time.Now()})
		if r.Status != 200 {
			t.Errorf("switch %s: %d %s", body, r.Status, r.Raw)
		}
		time.Sleep(phase)
	}
	stop.Store(true)
	wg.Wait()
	var before, during, after []time.Duration
	for _, s := range samples {
		switch {
		case s.at.Before(windows[0][0]):
			before = append(before, s.latency)
		case s.at.After(windows[len(windows)-1][1]):
			after = append(after, s.latency)
		default:
			in := false
			for _, w := range windows {
				in = in || (!s.at.Before(w[0]) && !s.at.After(w[1]))
			}
			if in {
				during = append(during, s.latency)
			}
		}
	}
	pct := func(d []time.Duration) string {
		if len(d) == 0 {
			return "no samples"
		}
		slices.Sort(d)
		return fmt.Sprintf("%d requests, p50 %v, p99 %v", len(d), d[len(d)/2], d[len(d)*99/100])
	}
	t.Logf("switch under load: %d requests, %d non-2xx, %d differing from the first mode", requests.Load(), non2xx.Load(), differ.Load())
	t.Logf("  before switches: %s", pct(before))
	t.Logf("  during switches: %s (%d switches, %v total)", pct(during), len(windows), totalWindow(windows))
	t.Logf("  after switches:  %s", pct(after))
	if non2xx.Load() != 0 || differ.Load() != 0 {
		t.Fatalf("%d non-2xx, %d differing results (first bad response: %v)", non2xx.Load(), differ.Load(), firstBad.Load())
	}
	if requests.Load() < 20 {
		t.Fatalf("only %d requests: the load test did not run", requests.Load())
	}
}

func totalWindow(ws [][2]time.Time) time.Duration {
	var d time.Duration
	for _, w := range ws {
		d += w[1].Sub(w[0])
	}
	return d
}

// hitsKey is the hits of a search response, for comparing answers.
func hitsKey(raw string) string {
	var r struct {
		Hits json.RawMessage `json:"hits"`
	}
	json.Unmarshal([]byte(raw), &r)
	return string(r.Hits)
}
