package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// fileChanges are the ways an operator changes a served file: truncated to
// nothing, a smaller index copied over it (O_TRUNC, then write), the same
// size with other bytes, and another file renamed over its path.
var fileChanges = map[string]func(t *testing.T, path string){
	"truncate": func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 0)) },
	"cp-smaller": func(t *testing.T, path string) {
		small, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, small, 0o644))
	},
	"rewrite-same-size": func(t *testing.T, path string) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for i := len(b) / 2; i < len(b); i += 7 {
			b[i] ^= 0x5a
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(b[len(b)/2:], int64(len(b)/2))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	},
	"rename-over": func(t *testing.T, path string) {
		small, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_large.faiss"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path+".new", small, 0o644))
		require.NoError(t, os.Rename(path+".new", path))
	},
}

// TestFileChangedUnderLoad is the load test of a served file changed under
// its index, for the mmap, pread and direct backends and every kind of
// change, with read leases on and off: clients search the changed index
// and a steady one throughout. The process survives; every answer of the
// changed index is FAISS's answer from the opened file or a 503
// index_file_changed, never anything else (no mix of two versions); after
// the change it is 503 until a reload, and GET and /metrics say it failed;
// the steady index answers correctly throughout; a reload serves again.
func TestFileChangedUnderLoad(t *testing.T) {
	f := loadRuns(t, "hnsw_flat_large")
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_large.faiss"))
	require.NoError(t, err)
	for _, leases := range []bool{true, false} {
		for _, backend := range []string{"mmap", "pread", "direct"} {
			for change, apply := range fileChanges {
				t.Run(fmt.Sprintf("leases=%v/%s/%s", leases, backend, change), func(t *testing.T) {
					prev := partial.SetFileLeases(leases)
					defer partial.SetFileLeases(prev)
					root := t.TempDir()
					path := filepath.Join(root, "v.faiss")
					require.NoError(t, os.WriteFile(path, src, 0o644))
					require.NoError(t, os.WriteFile(filepath.Join(root, "steady.faiss"), src, 0o644))
					_, ts := newTestServer(t, Config{DataRoots: []string{root}})
					r := call(t, ts, "PUT", "/indexes/v", fmt.Sprintf(`{"path":"v.faiss","backend":%q,"cache_bytes":1048576}`, backend))
					require.Equal(t, 200, r.Status, r.Raw)
					require.Equal(t, 200, call(t, ts, "PUT", "/indexes/steady", `{"path":"steady.faiss","backend":"mmap"}`).Status)
					bodies := make([]string, len(f.Queries))
					want := make([]string, len(f.Queries))
					for i, q := range f.Queries {
						bodies[i] = fmt.Sprintf(`{"vector":%s,"k":10,"method_parameters":{"ef_search":64}}`, vectorJSON(q))
						r := call(t, ts, "POST", "/indexes/v/_search", bodies[i])
						require.Equal(t, 200, r.Status, r.Raw)
						want[i] = hitsKey(r.Raw)
					}
					var stop, changed atomic.Bool
					var ok, unavailable, afterChange atomic.Int64
					var bad atomic.Value
					var wg sync.WaitGroup
					for c := range 3 {
						index := []string{"v", "v", "steady"}[c]
						wg.Go(func() {
							for i := c; !stop.Load(); i++ {
								qi := i % len(bodies)
								wasChanged := changed.Load()
								res, err := http.Post(ts.URL+"/indexes/"+index+"/_search", "application/json", strings.NewReader(bodies[qi]))
								if err != nil {
									bad.CompareAndSwap(nil, err.Error())
									return
								}
								raw, _ := io.ReadAll(res.Body)
								res.Body.Close()
								switch {
								case res.StatusCode == 200 && hitsKey(string(raw)) == want[qi]:
									ok.Add(1)
								case res.StatusCode == 503 && index == "v" && strings.Contains(string(raw), "index_file_changed"):
									unavailable.Add(1)
									if wasChanged {
										afterChange.Add(1)
									}
								default:
									bad.CompareAndSwap(nil, fmt.Sprintf("%s: %d %.300s", index, res.StatusCode, raw))
								}
							}
						})
					}
					time.Sleep(100 * time.Millisecond)
					apply(t, path)
					changed.Store(true)
					// Within the watcher's period every answer of v is a 503.
					require.Eventually(t, func() bool {
						return call(t, ts, "POST", "/indexes/v/_search", bodies[0]).Status == 503
					}, 5*fileCheckInterval, 5*time.Millisecond)
					time.Sleep(100 * time.Millisecond)
					stop.Store(true)
					wg.Wait()
					require.Nil(t, bad.Load(), "an answer that is neither the opened file's nor a 503")
					assert.Positive(t, afterChange.Load())
					info := call(t, ts, "GET", "/indexes/v", ``)
					assert.Equal(t, "failed", info.Body["state"], info.Raw)
					assert.Contains(t, info.Body["failure"], "file changed: v.faiss: ", "the file as the load named it")
					assert.NotContains(t, info.Raw, path, "not the server's path of it")
					assert.Contains(t, call(t, ts, "GET", "/metrics", ``).Raw, `faiss_sidecar_index_failed{index="v"} 1`)
					assert.Equal(t, 200, call(t, ts, "POST", "/indexes/steady/_search", bodies[0]).Status)
					// A reload serves the file as it is now.
					r = call(t, ts, "PUT", "/indexes/v/_mode", `{}`)
					if change == "truncate" {
						assert.Equal(t, 422, r.Status, r.Raw) // nothing left to serve
						return
					}
					if change == "cp-smaller" {
						assert.Equal(t, 409, r.Status, r.Raw) // another dimension
						return
					}
					require.Equal(t, 200, r.Status, r.Raw)
					assert.Equal(t, "serving", r.Body["state"])
					assert.Equal(t, 200, call(t, ts, "POST", "/indexes/v/_search", bodies[0]).Status)

				})
			}
		}
	}
}
